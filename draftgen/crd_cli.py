"""`draftgen crd`: print the CRD (the same text as crds/datasetgenerations.draftgen.io.yaml)."""

import argparse
import sys

from .crd import render


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def main(args: argparse.Namespace) -> int:
    sys.stdout.write(render())
    return 0
