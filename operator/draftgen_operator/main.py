"""`draftgen operator`: run the kopf operator with its liveness endpoint."""

from __future__ import annotations

import argparse
import logging

import kopf

from draftgen_contracts import exit_codes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", action="append", help="watch only these namespaces (default: all)")
    parser.add_argument("--liveness", default="http://0.0.0.0:8080/healthz",
                        help="kopf liveness endpoint (probes fail when the operator stops processing)")
    parser.add_argument("--verbose", action="store_true")


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("kopf.objects").setLevel(logging.DEBUG if args.verbose else logging.WARNING)  # no line per tick
    from . import handlers  # registers the handlers

    handlers.RESTRICTED = bool(args.namespace)

    kopf.run(standalone=True, clusterwide=not args.namespace, namespaces=args.namespace or (),
             liveness_endpoint=args.liveness or None)
    return exit_codes.OK
