"""The files of a dataset: a file, a folder of files or a glob (a Hugging Face shard set such as
`data/train-*.parquet`), each file's format, and the record that keeps row indexes stable.

A folder counts the files directly in it whose extension is one of SUFFIXES (a README, a
`.gitattributes` or a hidden file is not a dataset file); a glob counts the files it matches (a
pattern's `*` matches no hidden name). The files are read in name order, and a row's index counts on
from the rows of the files before it: the index of row 3 of the second file is the first file's row
count plus 3.

A file added later is appended predictably when it comes after every file read so far in name order
(the next shard: its rows come after the others', no index moves), and the last file may grow. Any
other change would move the indexes of rows already generated, so a run records the set it reads
(`inputs.json` beside its output, `record_file_set`) and refuses a set changed another way: a file
added before the last, a file gone, or a file other than the last changed in size.
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path
from typing import Literal

from jobrunner.shared.atomic import write_bytes_atomically

SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet", ".pq")
GLOB_CHARACTERS = frozenset("*?[")
INPUTS_FILE = "inputs.json"

FileFormat = Literal["jsonl", "json", "parquet"]


class DatasetRefused(ValueError):
    """A dataset file refused as a whole: the file, and why (with what to change)."""

    def __init__(self, path: str | os.PathLike, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


def is_glob(path: str | os.PathLike) -> bool:
    return bool(GLOB_CHARACTERS & set(str(path)))


def dataset_files(path: str | os.PathLike) -> list[Path]:
    """The files of a dataset in name order; DatasetRefused naming the path when there are none."""
    if is_glob(path):
        files = sorted(Path(p) for p in glob.glob(str(path)) if os.path.isfile(p))
    elif os.path.isdir(path):
        files = sorted(p for p in Path(path).iterdir()
                       if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in SUFFIXES)
    elif os.path.isfile(path):
        files = [Path(path)]
    else:
        raise DatasetRefused(path, "no such file or folder")
    if not files:
        raise DatasetRefused(path, f"holds no dataset file (a folder's files count by extension: {', '.join(SUFFIXES)})")
    return files


def resolves_outside(path: str | os.PathLike, roots: list[str]) -> str | None:
    """Where `path` really is (symlinks followed) when that is under none of `roots`; None when it is
    under one, or when no roots are given."""
    if not roots:
        return None
    real = Path(os.path.realpath(path))
    inside = any(real.is_relative_to(os.path.realpath(root)) for root in roots)
    return None if inside else str(real)


def files_outside(path: str | os.PathLike, roots: list[str]) -> list[tuple[Path, str]]:
    """Each file of the dataset that really is outside `roots`, with where it is."""
    return [(f, real) for f in dataset_files(path) if (real := resolves_outside(f, roots)) is not None]


def sniff_format(path: Path, declared: str = "auto") -> FileFormat:
    """The declared format, or the one the first bytes say (whatever the extension claims): Parquet's
    magic `PAR1`, `[` for a JSON array, anything else JSON Lines (an empty file included)."""
    if declared != "auto":
        return declared  # type: ignore[return-value]
    with open(path, "rb") as f:
        head = f.read(4096)
    if head.startswith(b"PAR1"):
        return "parquet"
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    return "json" if text.startswith(b"[") else "jsonl"


def _base(path: str | os.PathLike) -> Path:
    """The folder a dataset's file names are relative to in its record (a volume may be mounted
    elsewhere the next time): the folder itself, a file's folder, a glob's folder before any pattern."""
    if is_glob(path):
        parts = Path(path).parts
        return Path(*parts[:next(i for i, p in enumerate(parts) if is_glob(p))])
    return Path(path) if os.path.isdir(path) else Path(path).parent


def _described(path: str | os.PathLike, files: list[Path]) -> list[dict]:
    base = _base(path)
    return [{"name": str(f.relative_to(base)), "bytes": f.stat().st_size} for f in files]


def file_set_change(recorded: list[dict], now: list[dict]) -> str | None:
    """Why the files `now` would move row indexes from those `recorded`; None when they only add
    rows at the end (the last file grown, files after it in name order)."""
    if len(now) < len(recorded):
        return f"{recorded[len(now)]['name']} (read before) is gone"
    for i, (was, new) in enumerate(zip(recorded, now)):
        if was["name"] != new["name"]:
            return f"{new['name']} comes before {was['name']} (read before) in name order"
        last = i == len(recorded) - 1
        if new["bytes"] < was["bytes"] or not last and new["bytes"] != was["bytes"]:
            return f"{new['name']} changed size from {was['bytes']} to {new['bytes']} bytes"
    return None


def record_file_set(path: str | os.PathLike, folder: str | os.PathLike) -> list[Path]:
    """The dataset's files, once they keep the row indexes of the set recorded in `folder` (the
    dataset's output folder), which then records them; DatasetRefused when they would not."""
    files = dataset_files(path)
    now = _described(path, files)
    record = Path(folder) / INPUTS_FILE
    if record.is_file():
        change = file_set_change(json.loads(record.read_text())["files"], now)
        if change is not None:
            raise DatasetRefused(path, f"the dataset's files changed since this run started: {change}; rows "
                                       "generated already would change index. Add files only after the last "
                                       "in name order, or start a new run (another output folder)")
    record.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomically(record, json.dumps({"path": str(path), "files": now}, indent=1).encode())
    return files
