"""Crash-safe, append-only generation output (format: docs/contracts.md).

One writer per (dataset, replica) owns three files in `<output_root>/generate/<dataset>/`:

- `part-rNNN.jsonl`: one completed response per line (the records merge reads);
- `part-rNNN.skipped.jsonl`: one line per source row that was skipped, with its reason;
- `part-rNNN.summary.json`: written atomically (tmp + fsync + rename), it holds the byte offsets
  of both logs it has accounted for, the counts, and the rows already done, so resume reads the
  summary and only the bytes appended after it.

Why a SIGKILL at any instant loses no completed record and duplicates none:

- a record is one `os.write()` of its whole line on an `O_APPEND` descriptor. Once `write()`
  returns, the bytes are in the kernel's page cache, which belongs to the file, not to the process:
  killing the process cannot undo them; only a kernel crash or power loss can (that is what fsync
  is for, below). A kill in the middle of a write leaves at most one line without its `\\n`, a torn
  tail that readers ignore and the writer cuts on resume;
- resume is by row (sample id), never by line count: the done rows come from the summary plus a scan
  of the tail after the summary's offset, so a record written after the last summary is still found
  and its row is not generated again.

fsync cadence: `sync()` fsyncs both logs, then writes the summary. The engine calls it at most every
`progress_interval_s` seconds and always before it publishes progress, so published totals are always
durable, even across a node crash; a node crash loses at most the records since the last sync, whose
rows are then simply generated again (never counted twice, because the totals come from the file).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from draftgen_contracts import names
from draftgen_contracts.generation_record import GenerationRecord, SkipEntry
from draftgen_contracts.progress import DurableCounts
from jobrunner.shared.atomic import write_bytes_atomically

SUMMARY_VERSION = 1


def dataset_dir(output_root: str | os.PathLike, dataset: str) -> Path:
    return Path(output_root) / names.GENERATE_DIR / dataset


def part_path(output_root: str | os.PathLike, dataset: str, replica: int) -> Path:
    return dataset_dir(output_root, dataset) / names.part_file_name(replica)


def skipped_path(output_root: str | os.PathLike, dataset: str, replica: int) -> Path:
    return dataset_dir(output_root, dataset) / names.skipped_file_name(replica)


def summary_path(output_root: str | os.PathLike, dataset: str, replica: int) -> Path:
    return dataset_dir(output_root, dataset) / names.summary_file_name(replica)


def record_files(output_root: str | os.PathLike, dataset: str | None = None) -> list[Path]:
    """The record part files under `output_root`, of one dataset or of all, in a stable order."""
    base = Path(output_root) / names.GENERATE_DIR
    if not base.is_dir():
        return []
    dirs = [base / dataset] if dataset is not None else sorted(p for p in base.iterdir() if p.is_dir())
    files: list[Path] = []
    for d in dirs:
        if d.is_dir():
            files.extend(sorted(p for p in d.iterdir() if names.replica_of_part_file(p.name) is not None))
    return files


def datasets_in(output_root: str | os.PathLike) -> list[str]:
    """Names of the datasets that have an output folder under `output_root`."""
    base = Path(output_root) / names.GENERATE_DIR
    return sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []


def _complete_lines(path: Path, start: int = 0) -> Iterator[tuple[int, bytes]]:
    """(end offset, line) for each line that ends in `\\n`, from byte `start`; a torn tail is left out."""
    with open(path, "rb") as f:
        f.seek(start)
        offset = start
        for line in f:
            if not line.endswith(b"\n"):
                return
            offset += len(line)
            yield offset, line


def iter_records(path: str | os.PathLike) -> Iterator[dict]:
    """Yield the complete records of one part file as their JSON objects, in write order; a torn final
    line is ignored."""
    for _, line in _complete_lines(Path(path)):
        yield json.loads(line)


@dataclass
class OutputTotals:
    """What one part file holds, as counted up to `records_bytes` / `skipped_bytes`."""

    records: int = 0
    completion_tokens: int = 0
    prompt_tokens: int = 0
    finish_reasons: dict[str, int] = field(default_factory=dict)
    cut_records: int = 0  # responses cut at the budget (`cut_at_budget`)
    cut_tokens: int = 0
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    # Parallel lists, in write order: the row of each record and its completion length (the
    # length distribution survives restarts without rereading the records).
    rows: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    prompt_lengths: list[int] = field(default_factory=list)  # beside `lengths` (empty in older summaries)
    skipped_rows: list[int] = field(default_factory=list)
    first_finished_at: float | None = None
    last_finished_at: float | None = None
    # When the first recorded request was sent (its finish less its end-to-end time): a rate over
    # [first_started_at, last_finished_at] makes sense even when a few responses finish together.
    first_started_at: float | None = None
    records_bytes: int = 0
    skipped_bytes: int = 0

    @property
    def skipped(self) -> int:
        return len(self.skipped_rows)

    def add_record(self, record: GenerationRecord, end_offset: int) -> None:
        self.records += 1
        self.completion_tokens += record.completion_tokens
        self.prompt_tokens += record.prompt_tokens
        reason = record.finish_reason
        self.finish_reasons[reason] = self.finish_reasons.get(reason, 0) + 1
        if record.cut_at_budget:
            self.cut_records += 1
            self.cut_tokens += record.completion_tokens
        self.rows.append(record.row)
        self.lengths.append(record.completion_tokens)
        self.prompt_lengths.append(record.prompt_tokens)
        if record.timings is not None:
            finished_at = record.timings.finished_at
            if self.first_finished_at is None:
                self.first_finished_at = finished_at
            self.last_finished_at = finished_at
            started = finished_at - record.timings.e2e_s
            self.first_started_at = started if self.first_started_at is None else min(self.first_started_at, started)
        self.records_bytes = end_offset

    def add_skip(self, entry: SkipEntry, end_offset: int) -> None:
        self.skipped_by_reason[entry.reason] = self.skipped_by_reason.get(entry.reason, 0) + 1
        self.skipped_rows.append(entry.row)
        self.skipped_bytes = end_offset

    def counts(self) -> DurableCounts:
        return DurableCounts(completion_tokens=self.completion_tokens, samples=self.records, skipped=self.skipped,
                             truncated=self.finish_reasons.get("length", 0), cut=self.cut_records,
                             cut_tokens=self.cut_tokens)

    def to_json(self) -> dict:
        return {"version": SUMMARY_VERSION, **self.__dict__}

    @classmethod
    def from_json(cls, data: dict) -> OutputTotals:
        if data.get("version") != SUMMARY_VERSION:
            raise ValueError(f"summary version {data.get('version')!r}, expected {SUMMARY_VERSION}")
        fields = {k: v for k, v in data.items() if k != "version"}
        return cls(**fields)


def read_summary(output_root: str | os.PathLike, dataset: str, replica: int) -> OutputTotals | None:
    """The last durable summary of one part, or None when there is none (or it is unreadable)."""
    try:
        return OutputTotals.from_json(json.loads(summary_path(output_root, dataset, replica).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def summary_replicas(output_root: str | os.PathLike, dataset: str) -> list[int]:
    """Replica indices that have a summary for `dataset`."""
    d = dataset_dir(output_root, dataset)
    found = (names.replica_of_summary_file(p.name) for p in d.iterdir()) if d.is_dir() else ()
    return sorted(r for r in found if r is not None)


def other_parts(output_root: str | os.PathLike, dataset: str, replica: int, replicas: int) -> dict[int, DurableCounts]:
    """The durable counts of the other replicas' parts of `dataset` (of the `replicas` a run has now),
    by replica index, as their summaries say."""
    found = {r: read_summary(output_root, dataset, r) for r in summary_replicas(output_root, dataset)
             if r != replica and r < replicas}
    return {r: totals.counts() for r, totals in found.items() if totals is not None}


def _summary_fits(offset: int, path: Path) -> bool:
    """Whether a summary offset can be trusted for this file: inside it, and at a line boundary."""
    if offset == 0:
        return True
    try:
        if path.stat().st_size < offset:
            return False
        with open(path, "rb") as f:
            f.seek(offset - 1)
            return f.read(1) == b"\n"
    except OSError:
        return False


def _recover(path: Path, start: int, parse, add) -> int:
    """Scan `path` from `start`, feeding each complete line, as `parse` reads its JSON, to
    `add(entry, end)`; cut the rest (a torn tail, or after a node crash a garbled line) and return the
    new file size. A line of valid JSON that `parse` refuses raises: it is no torn write, and cutting
    there would throw away every record after it."""
    good_end = start
    if path.exists():
        for end, line in _complete_lines(path, start):
            try:
                obj = json.loads(line)
            except ValueError:
                break
            add(parse(obj), end)
            good_end = end
        if path.stat().st_size != good_end:
            os.truncate(path, good_end)
    return good_end


def _write_line(fd: int, line: bytes) -> None:
    # A regular-file write() writes everything unless the disk is full or a signal interrupts it;
    # the loop finishes a short write so the line still ends up whole and in one piece.
    view = memoryview(line)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _append(fd: int, line: bytes, end: int) -> None:
    """Append a whole line or nothing: a write that fails half-way (a full volume, EIO) is cut back to
    `end`, where the file ended before it. Half a line left there would have the next record appended
    to it, and the next resume's scan would stop at it, cutting every record after it."""
    try:
        _write_line(fd, line)
    except BaseException:
        os.ftruncate(fd, end)
        raise


class PartWriter:
    """The single writer of one dataset's part files for one replica.

    Opening it recovers: it loads the summary, scans only the bytes after it, cuts a torn tail and
    writes a fresh summary, so `done_rows` is exact before the first new record is written.
    """

    def __init__(self, output_root: str | os.PathLike, dataset: str, replica: int):
        self.dataset = dataset
        self.replica = replica
        self.records_path = part_path(output_root, dataset, replica)
        self.skipped_path = skipped_path(output_root, dataset, replica)
        self.summary_path = summary_path(output_root, dataset, replica)
        self.records_path.parent.mkdir(parents=True, exist_ok=True)
        # One writer per part file: a predecessor still stopping (a pod terminating, a local child
        # whose parent died) finishes its last sync before this one reads what it wrote.
        self._records_fd = os.open(self.records_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        fcntl.flock(self._records_fd, fcntl.LOCK_EX)

        totals = read_summary(output_root, dataset, replica)
        if totals is None or not (
            _summary_fits(totals.records_bytes, self.records_path)
            and _summary_fits(totals.skipped_bytes, self.skipped_path)
        ):
            totals = OutputTotals()
        self.totals = totals
        _recover(self.records_path, totals.records_bytes, GenerationRecord.from_json, totals.add_record)
        _recover(self.skipped_path, totals.skipped_bytes, SkipEntry.from_json, totals.add_skip)
        self._done = set(totals.rows) | set(totals.skipped_rows)
        self._skipped_fd = os.open(self.skipped_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._dirty = False
        self.durable = OutputTotals()
        self.sync(force=True)

    def is_done(self, row: int) -> bool:
        """Whether this row already has a record or a skip entry (resume never repeats it)."""
        return row in self._done

    def append_record(self, record: GenerationRecord) -> None:
        """Append one completed response (its line: docs/contracts.md#generation-output)."""
        if record.row in self._done:
            raise ValueError(f"{record.sample_id} already written")
        if record.dataset != self.dataset or (problem := record.problem()) is not None:
            raise ValueError(f"{record.sample_id}: {problem or f'not a record of {self.dataset}'}")
        line = (json.dumps(record.to_json(), separators=(",", ":")) + "\n").encode()
        _append(self._records_fd, line, self.totals.records_bytes)
        self.totals.add_record(record, self.totals.records_bytes + len(line))
        self._done.add(record.row)
        self._dirty = True

    def append_skip(self, row: int, reason: str, detail: str = "") -> None:
        """Record that a source row was skipped, so it is counted once and not retried on resume."""
        if row in self._done:
            raise ValueError(f"{names.sample_id(self.dataset, row)} already written")
        entry = SkipEntry(names.sample_id(self.dataset, row), row, reason, detail[:500])
        line = (json.dumps(entry.to_json(), separators=(",", ":")) + "\n").encode()
        _append(self._skipped_fd, line, self.totals.skipped_bytes)
        self.totals.add_skip(entry, self.totals.skipped_bytes + len(line))
        self._done.add(row)
        self._dirty = True

    def sync(self, force: bool = False) -> OutputTotals:
        """fsync both logs, then write the summary; returns the totals now durable."""
        if self._dirty or force:
            os.fsync(self._records_fd)
            os.fsync(self._skipped_fd)
            text = json.dumps(self.totals.to_json(), separators=(",", ":"))
            write_bytes_atomically(self.summary_path, text.encode())
            self.durable = OutputTotals.from_json(json.loads(text))  # a copy: totals keep growing
            self._dirty = False
        return self.durable

    def close(self) -> None:
        if self._records_fd >= 0:
            self.sync()
            os.close(self._records_fd)
            os.close(self._skipped_fd)
            self._records_fd = self._skipped_fd = -1
