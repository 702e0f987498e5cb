"""Which run owns a local output folder: a file in the folder naming the DatasetGeneration, written
once, with O_EXCL, by the first `draftgen run` that reaches it (the operator records the same
ownership in a ConfigMap, plan.output_lock)."""

from __future__ import annotations

import os
from pathlib import Path

OWNER_FILE = ".draftgen-owner"


def owner_of(output_root: Path) -> str | None:
    """The name of the run that owns the folder; None when nobody claimed it yet."""
    try:
        return (output_root / OWNER_FILE).read_text().strip() or None
    except FileNotFoundError:
        return None


def claim(output_root: Path, name: str) -> None:
    """Claim the folder for `name` unless someone already has (then `owner_of` tells who)."""
    output_root.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(output_root / OWNER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())
