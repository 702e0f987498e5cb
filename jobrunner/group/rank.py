"""`jobrunner rank -- jobrunner generate ARGS...`: a replica-across-nodes pod's main container. Rank 0
runs the generate command it is given; the other ranks follow the group (jobrunner.group.follower),
reading the same arguments for their server's URL, their replica and its report."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from draftgen_contracts import exit_codes
from jobrunner.shared.config import ConfigError, load_config
from jobrunner.generate import cli as generate_cli
from jobrunner.generate.run import configure_logging, make_coordinator
from jobrunner.group.follower import follow
from jobrunner.group.leader_address import rank_from_env


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--leader-file", required=True, help="the file resolve-leader wrote the leader's IP to")
    parser.add_argument("--dist-port", type=int, required=True, help="the leader's rendezvous port (--dist-init-addr)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- jobrunner generate ARGS... (rank 0's command)")


def main(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if command[:2] != ["jobrunner", "generate"]:
        print("jobrunner rank: expected `-- jobrunner generate ARGS...`", file=sys.stderr)
        return exit_codes.BAD_CONFIG
    try:
        rank = rank_from_env(dict(os.environ))
    except ValueError as e:
        print(f"jobrunner rank: {e}", file=sys.stderr)
        return exit_codes.BAD_CONFIG
    if rank == 0:
        os.execvp(command[0], command)  # the leader's pod is a single-node replica's, but for its server's flags
    parser = argparse.ArgumentParser(prog="jobrunner generate")
    generate_cli.add_arguments(parser)
    generate = parser.parse_args(command[2:])
    try:
        config = load_config(generate.config)
    except ConfigError as e:
        print(e, file=sys.stderr)
        return exit_codes.BAD_CONFIG
    replica = config.replica if generate.replica is None else generate.replica
    config = config.model_copy(update={"replica": replica})
    configure_logging()
    leader = Path(args.leader_file).read_text().strip().strip("[]")
    coordinator = make_coordinator(config)
    # The report as it is when the group goes, not as it was at the start: the leader's `finished`
    # comes later, and without it an ordered end reads as a lost group, started again for nothing.
    return asyncio.run(follow(generate.server_url or config.server_url, (leader, args.dist_port),
                              coordinator.own_now))
