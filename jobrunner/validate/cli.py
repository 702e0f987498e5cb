"""`jobrunner validate`'s command line: one row per check, the first problems, exit 1 on any."""

from __future__ import annotations

import argparse
from pathlib import Path

from draftgen_contracts import exit_codes
from jobrunner.validate.checks import table
from jobrunner.validate.run import validate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", required=True, type=Path, help="a merged corpus directory (jobrunner merge)")
    parser.add_argument("--states", type=Path, help="its extracted hidden states (jobrunner extract --out)")


def main(args: argparse.Namespace) -> int:
    checks = validate(args.corpus, args.states)
    print("\n".join(table(checks)))
    bad = any(c.problems for c in checks)
    print("validate: " + ("problems found" if bad else "no problem found"))
    return exit_codes.FAILED if bad else exit_codes.OK
