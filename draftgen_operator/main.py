"""`draftgen operator`: run the kopf operator with its liveness endpoint; with `--leader-election`,
only once this replica holds the leader Lease (lease.py), answering probes while it stands by."""

from __future__ import annotations

import argparse
import contextlib
import http.server
import logging
import os
import threading
from urllib.parse import urlsplit

import kopf

from draftgen_contracts import exit_codes

from . import lease

log = logging.getLogger("draftgen.operator")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", action="append", help="watch only these namespaces (default: all)")
    parser.add_argument("--liveness", default="http://0.0.0.0:8080/healthz",
                        help="kopf liveness endpoint (probes fail when the operator stops processing)")
    parser.add_argument("--leader-election", action="store_true",
                        help="reconcile only while holding the Lease --lease-name (several replicas, one active)")
    parser.add_argument("--lease-name", default="draftgen-operator")
    parser.add_argument("--lease-namespace", default=None, help="default: the pod's namespace (POD_NAMESPACE)")
    defaults = lease.Timing()
    parser.add_argument("--lease-duration", type=float, default=defaults.duration_s,
                        help="seconds a Lease unrenewed is free to take (a standby's takeover after a crash)")
    parser.add_argument("--renew-deadline", type=float, default=defaults.renew_deadline_s,
                        help="seconds the leader goes on without renewing before it exits")
    parser.add_argument("--retry-period", type=float, default=defaults.retry_s, help="seconds between Lease tries")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    parser.add_argument("--verbose", action="store_true")


def main(args: argparse.Namespace) -> int:
    configure_logging(args.log_format, args.verbose)
    from . import handlers, metrics  # registers the handlers

    handlers.RESTRICTED = bool(args.namespace)
    elector = elector_from(args) if args.leader_election else None
    metrics.serve()
    if elector is not None:
        with answering_probes(args.liveness):
            elector.wait_to_lead(threading.Event())
        stop_renewing = threading.Event()
        elector.keep(on_lost=lambda: os._exit(exit_codes.FAILED), stop=stop_renewing)
    metrics.LEADER.set(1)
    try:
        kopf.run(standalone=True, clusterwide=not args.namespace, namespaces=args.namespace or (),
                 liveness_endpoint=args.liveness or None)
    finally:
        if elector is not None:
            stop_renewing.set()
            elector.release()
    return exit_codes.OK


def elector_from(args: argparse.Namespace) -> lease.Elector:
    from kubernetes import client, config
    timing = lease.Timing(args.lease_duration, args.renew_deadline, args.retry_period)
    namespace = args.lease_namespace or lease.own_namespace()
    if timing.problem() or not namespace:
        raise SystemExit(f"draftgen operator: {timing.problem() or '--lease-namespace is required outside a pod'}")
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return lease.Elector(client.ApiClient(), namespace, args.lease_name, lease.identity(), timing)


@contextlib.contextmanager
def answering_probes(endpoint: str):
    """Answer the liveness (and readiness) probe on kopf's endpoint while standing by: a standby is
    healthy, and kopf's own endpoint starts only with kopf."""
    if not endpoint:
        yield
        return
    url = urlsplit(endpoint)

    class Healthy(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200 if self.path == url.path else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"standby": true}')

        def log_message(self, *_):  # no line per probe
            pass

    server = http.server.ThreadingHTTPServer((url.hostname, url.port or 80), Healthy)
    thread = threading.Thread(target=server.serve_forever, name="standby probes", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


class JsonFormatter(logging.Formatter):
    """One JSON object per line (time, level, logger, message), for log pipelines that parse it."""

    def format(self, record: logging.LogRecord) -> str:
        import json
        entry = {"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
                 "message": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(log_format: str, verbose: bool) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])
    logging.getLogger("kopf.objects").setLevel(logging.DEBUG if verbose else logging.WARNING)  # no line per tick
    logging.getLogger("aiohttp.access").setLevel(logging.DEBUG if verbose else logging.WARNING)  # nor per probe
