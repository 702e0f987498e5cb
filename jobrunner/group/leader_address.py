"""`jobrunner resolve-leader`: the group leader's IP, written where the server's launcher reads it.

SGLang takes `--dist-init-addr HOST:PORT`, and threads of 2025-2026 report paths where only an IP
literal works, so each rank resolves the leader's name before its server starts: rank 0 writes its
own pod IP; the others resolve `<job>-0.<ranks service>`, which cluster DNS answers once the leader
pod exists (the headless Service publishes not-ready addresses), trying again until a bound and then
failing with the name and the resolver's last words.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
import time
from pathlib import Path

from draftgen_contracts import exit_codes, names
from jobrunner.shared.atomic import write_bytes_atomically

POLL_S = 1.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--leader", required=True, help="the leader pod's DNS name (<job>-0.<service>)")
    parser.add_argument("--out", required=True, help="file to write the leader's IP to")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the name to resolve")


def rank_from_env(env: dict[str, str]) -> int:
    """This pod's rank: its completion index in the group's Indexed Job."""
    value = env.get(names.COMPLETION_INDEX_ENV, "")
    if not value.isdigit():
        raise ValueError(f"{names.COMPLETION_INDEX_ENV}={value!r}: not a pod of an Indexed Job")
    return int(value)


def resolve(name: str) -> str:
    """The first IPv4 (else IPv6) address `name` resolves to; OSError when none."""
    found = {info[4][0] for info in socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)}
    ordered = sorted(found, key=lambda ip: (ipaddress.ip_address(ip).version, ip))
    if not ordered:
        raise OSError(f"{name}: no address")
    return ordered[0]


def wait_resolved(name: str, timeout_s: float, clock=time.monotonic, sleep=time.sleep) -> str:
    deadline, last = clock() + timeout_s, ""
    while True:
        try:
            return resolve(name)
        except OSError as e:
            last = str(e)
        if clock() >= deadline:
            raise TimeoutError(f"the group leader {name} did not resolve in {timeout_s:.0f} s (last: {last}); "
                               "is its pod scheduled, and does the Service of its subdomain exist?")
        sleep(POLL_S)


def main(args: argparse.Namespace) -> int:
    try:
        rank = rank_from_env(dict(os.environ))
        ip = os.environ["POD_IP"] if rank == 0 else wait_resolved(args.leader, args.timeout)
    except (ValueError, KeyError, TimeoutError) as e:
        print(f"jobrunner resolve-leader: {e}", file=sys.stderr, flush=True)
        return exit_codes.FAILED
    # SGLang's --dist-init-addr takes an IPv6 literal in brackets.
    address = f"[{ip}]" if ipaddress.ip_address(ip).version == 6 else ip
    write_bytes_atomically(Path(args.out), address.encode())
    print(f"rank {rank}: the group leader is at {address}", flush=True)
    return exit_codes.OK
