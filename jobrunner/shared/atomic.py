"""Atomic file replacement: write a temp file beside the target, fsync it, rename it over the target,
fsync the folder. A reader (or a process restarted after a crash) sees the old file or the new one,
never a part of either."""

from __future__ import annotations

import json
import os
from pathlib import Path


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a rename in this folder durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomically(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # per process: two writers never share one
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full volume gets its room back; the old file stays as it was
        raise
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_json_atomically(path: str | os.PathLike, obj, indent: int | None = 1) -> None:
    write_bytes_atomically(path, (json.dumps(obj, indent=indent, sort_keys=True) + "\n").encode())
