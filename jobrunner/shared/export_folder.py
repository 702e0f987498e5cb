"""Where an export is built (beside its final place) and how it is swapped in whole: a crash or a
full volume leaves the last whole export or none, never part of one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

UNFINISHED_SUFFIX = ".tmp"


def unfinished(directory: Path) -> Path:
    """Where an export is built before it is swapped in."""
    return directory.with_name(directory.name + UNFINISHED_SUFFIX)


def fresh(directory: Path) -> Path:
    """An export is rebuilt whole: built beside its final place, then swapped in."""
    tmp = unfinished(directory)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def commit(tmp: Path, directory: Path) -> Path:
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(tmp, directory)
    return directory
