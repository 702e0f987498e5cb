"""`draftgen operator`: run the kopf operator with its liveness endpoint."""

from __future__ import annotations

import argparse
import logging

import kopf


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", action="append", help="watch only these namespaces (default: all)")
    parser.add_argument("--liveness", default="http://0.0.0.0:8080/healthz",
                        help="kopf liveness endpoint (probes fail when the operator stops processing)")
    parser.add_argument("--verbose", action="store_true")


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    from . import handlers  # noqa: F401  (registers the handlers)

    kopf.run(standalone=True, clusterwide=not args.namespace, namespaces=args.namespace or (),
             liveness_endpoint=args.liveness or None)
    return 0
