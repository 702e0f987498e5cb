"""`jobrunner copy-code DEST`: jobrunner's own Python packages, copied where another image's Python
can import them (PYTHONPATH=DEST).

Why: the SGLang extraction backend runs inside the SGLang image, with its Python, its torch and its
kernels, as the generation pods do; the extraction pod's init container, from draftgen's image,
copies jobrunner into a shared emptyDir first (docs/eagle3.md#the-extraction-pod). jobrunner's
extraction needs nothing beyond what an SGLang image has (torch, transformers, safetensors, numpy).
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
from pathlib import Path

from draftgen_contracts import exit_codes

PACKAGES = ("jobrunner", "draftgen_contracts")  # jobrunner and the one layer below it
NOT_COPIED = shutil.ignore_patterns("__pycache__", "*.pyc", "*_test.py")


def copy_code(dest: Path) -> list[Path]:
    """Each package's folder copied under `dest` (replacing an older copy); returns the copies."""
    copies = []
    for name in PACKAGES:
        source = Path(importlib.import_module(name).__file__).parent
        target = dest / name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target, ignore=NOT_COPIED)
        copies.append(target)
    return copies


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dest", help="folder to copy the packages into (the pod's shared emptyDir)")


def main(args: argparse.Namespace) -> int:
    try:
        for copy in copy_code(Path(args.dest)):
            print(f"copy-code: {copy}")
    except OSError as e:
        print(f"jobrunner copy-code: error: {e}", file=sys.stderr)
        return exit_codes.BAD_CONFIG
    return exit_codes.OK
