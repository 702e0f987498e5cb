"""`draftgen crd`: print the CRD (the same text as crds/datasetgenerations.draftgen.io.yaml)."""

import argparse
import sys

from draftgen_contracts import exit_codes

from .crd import render


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def main(args: argparse.Namespace) -> int:
    sys.stdout.write(render())
    return exit_codes.OK
