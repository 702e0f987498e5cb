"""A full output volume, as every stage says it: it stops with exit VOLUME_FULL, keeping what it wrote
(each file of draftgen's is written whole or not at all, so nothing half-written is left to read),
and says where, how much is free and what it still needs. The reconcile then says so on the object
and tries the stage again later (draftgen/policies/space_policy.py)."""

from __future__ import annotations

import errno
import shutil
import sys
from pathlib import Path

from draftgen_contracts.hidden_state_layout import human_bytes

FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
# How libraries that are not Python word the same errors (safetensors' Rust IoError: "os error 28").
FULL_WORDS = ("No space left on device", "Disk quota exceeded", "os error 28", "os error 122")


def is_full_volume(error: BaseException | None) -> bool:
    """Whether the error, or one it was raised from, is a full disk or an exceeded quota."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, OSError) and error.errno in FULL_ERRNOS:
            return True
        if any(words in str(error) for words in FULL_WORDS):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


# Free space below which a failed write is taken for a full volume whatever the error says (torch.save
# words a failed write "unexpected pos", losing the OSError).
NEARLY_FULL_BYTES = 1 << 20


def ran_out_of_room(error: BaseException, path: Path) -> bool:
    """Whether writing under `path` failed for want of room: the error says so, or the volume is full."""
    return is_full_volume(error) or free_bytes(path) < NEARLY_FULL_BYTES


def free_bytes(path: Path) -> int:
    """Free bytes on the volume of `path` (its nearest existing folder)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def full_at(path: Path) -> str:
    return f"volume full at {path}: {human_bytes(free_bytes(path))} free"


def needs(what: str, path: Path, still_needed: float) -> str:
    """The words a stage stops with: where, what is free, what it still needs and so how much more room."""
    more = max(0.0, still_needed - free_bytes(path))
    return (f"{full_at(path)}; still to write: {what}, about {human_bytes(still_needed)}: "
            f"make about {human_bytes(more)} more room")


def say_on_stderr(text: str) -> None:
    """The stop's words, where a log on the full volume itself (the local runner's) may not take them."""
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:
        pass
