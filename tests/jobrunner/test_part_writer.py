"""The part writer: append, torn tails, resume from the summary, resume after a lost summary."""

import json
import os
import threading
from dataclasses import replace

import pytest

from draftgen_contracts.generation_record import GenerationRecord
from draftgen_dev.builders import generation_record
from jobrunner.shared import output


def record(row: int, n: int = 3, reason: str = "stop") -> GenerationRecord:
    return generation_record("ds", row, [1, 2], list(range(n)), reason)


def test_records_round_trip_and_totals(tmp_path):
    w = output.PartWriter(tmp_path, "ds", 0)
    w.append_record(record(0, 3))
    w.append_record(record(2, 5, "length"))
    w.append_skip(4, "prompt_too_long", "300 > 256")
    w.close()
    path = output.part_path(tmp_path, "ds", 0)
    assert [r["row"] for r in output.iter_records(path)] == [0, 2]
    assert output.record_files(tmp_path) == [path]
    s = output.read_summary(tmp_path, "ds", 0)
    assert (s.records, s.completion_tokens, s.finish_reasons) == (2, 8, {"stop": 1, "length": 1})
    assert s.skipped_by_reason == {"prompt_too_long": 1}
    assert s.records_bytes == path.stat().st_size


def test_duplicate_row_is_refused(tmp_path):
    w = output.PartWriter(tmp_path, "ds", 0)
    w.append_record(record(1))
    with pytest.raises(ValueError):
        w.append_record(record(1))
    with pytest.raises(ValueError):
        w.append_skip(1, "x")


def test_completion_tokens_must_match_output_ids(tmp_path):
    w = output.PartWriter(tmp_path, "ds", 0)
    with pytest.raises(ValueError, match=r"ds/000000001: completion_tokens \(9\) != len\(output_ids\) \(3\)"):
        w.append_record(replace(record(1), completion_tokens=9))
    with pytest.raises(ValueError, match="finish_reason 'abort'"):
        w.append_record(replace(record(1), finish_reason="abort"))


def killed(writer: output.PartWriter) -> None:
    """What SIGKILL leaves: the descriptors closed by the kernel (the lock with them), nothing synced."""
    os.close(writer._records_fd)
    os.close(writer._skipped_fd)


def test_a_second_writer_of_the_same_part_waits_for_the_first(tmp_path):
    first = output.PartWriter(tmp_path, "ds", 0)
    first.append_record(record(0))
    opened = []
    second = threading.Thread(target=lambda: opened.append(output.PartWriter(tmp_path, "ds", 0)))
    second.start()
    second.join(0.5)
    assert second.is_alive() and not opened  # it waits on the lock, reading nothing yet
    first.close()
    second.join(10)
    assert opened and opened[0].is_done(0)  # and then sees everything the first one wrote
    opened[0].close()


def test_torn_tail_is_ignored_by_readers_and_cut_on_resume(tmp_path):
    w = output.PartWriter(tmp_path, "ds", 0)
    w.append_record(record(0))
    w.sync()
    w.append_record(record(1))  # after the summary: found by the tail scan
    path = output.part_path(tmp_path, "ds", 0)
    with open(path, "ab") as f:
        f.write(b'{"sample_id": "ds/000000002", "row": 2, "outp')  # killed mid-write
    assert [r["row"] for r in output.iter_records(path)] == [0, 1]

    killed(w)
    w2 = output.PartWriter(tmp_path, "ds", 0)
    assert w2.is_done(0) and w2.is_done(1) and not w2.is_done(2)
    assert w2.totals.records == 2
    assert path.read_bytes().endswith(b"\n")
    w2.append_record(record(2))
    w2.close()
    assert [r["row"] for r in output.iter_records(path)] == [0, 1, 2]


def test_resume_reads_only_the_tail_after_the_summary(tmp_path):
    w = output.PartWriter(tmp_path, "ds", 0)
    for row in range(5):
        w.append_record(record(row))
    w.close()
    path = output.part_path(tmp_path, "ds", 0)
    # Overwrite the summarised prefix with garbage of the same length: a resume that trusts the
    # summary never reads it, so the totals still come out right.
    size = path.stat().st_size
    data = bytearray(path.read_bytes())
    data[: size - 1] = b"x" * (size - 1)
    path.write_bytes(bytes(data))
    w2 = output.PartWriter(tmp_path, "ds", 0)
    assert w2.totals.records == 5 and w2.totals.rows == [0, 1, 2, 3, 4]


def test_summary_that_does_not_fit_the_file_forces_a_full_rescan(tmp_path):
    w = output.PartWriter(tmp_path, "ds", 0)
    for row in range(3):
        w.append_record(record(row))
    w.close()
    summary = output.summary_path(tmp_path, "ds", 0)
    data = json.loads(summary.read_text())
    data["records_bytes"] += 5  # points past a line boundary
    data["records"] = 99
    summary.write_text(json.dumps(data))
    w2 = output.PartWriter(tmp_path, "ds", 0)
    assert w2.totals.records == 3


def test_missing_summary_rescans_everything(tmp_path):
    w = output.PartWriter(tmp_path, "ds", 0)
    w.append_record(record(0, 4))
    w.append_skip(1, "bad_json")
    w.close()
    os.unlink(output.summary_path(tmp_path, "ds", 0))
    w2 = output.PartWriter(tmp_path, "ds", 0)
    assert (w2.totals.records, w2.totals.completion_tokens, w2.totals.skipped) == (1, 4, 1)
    assert w2.is_done(1)


def test_durable_totals_lag_until_sync(tmp_path):
    w = output.PartWriter(tmp_path, "ds", 0)
    w.append_record(record(0, 4))
    assert w.durable.completion_tokens == 0
    assert w.sync().completion_tokens == 4
    w.append_record(record(1, 4))
    assert w.durable.completion_tokens == 4 and w.durable.rows == [0]


def test_a_whole_line_that_is_no_record_stops_the_writer_and_cuts_nothing(tmp_path):
    """Only a torn or garbled line is cut on resume: a complete JSON line the record type refuses is
    no torn write, and cutting there would throw away every record after it."""
    w = output.PartWriter(tmp_path, "ds", 0)
    w.append_record(record(0))
    w.close()
    path = output.part_path(tmp_path, "ds", 0)
    os.remove(output.summary_path(tmp_path, "ds", 0))
    with open(path, "a") as f:
        f.write(json.dumps({"row": 1}) + "\n" + json.dumps(record(2).to_json()) + "\n")
    size = path.stat().st_size
    with pytest.raises(KeyError):
        output.PartWriter(tmp_path, "ds", 0)
    assert path.stat().st_size == size


def test_a_write_that_fails_half_way_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    """A full volume in the middle of a line: the half line is cut off at once, so the next record
    does not follow it and the next resume's scan keeps every record written after the failure."""
    w = output.PartWriter(tmp_path, "a", 0)
    for row in range(3):
        w.append_record(generation_record("a", row=row))
    before = w.records_path.read_bytes()
    real = output._write_line

    def half_then_full(fd, line):
        os.write(fd, line[: len(line) // 2])
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(output, "_write_line", half_then_full)
    with pytest.raises(OSError):
        w.append_record(generation_record("a", row=3))
    with pytest.raises(OSError):
        w.append_skip(4, "bad_json")
    assert w.records_path.read_bytes() == before and w.skipped_path.read_bytes() == b""
    monkeypatch.setattr(output, "_write_line", real)
    for row in (3, 5):  # room again: row 3 was never written, so it is written now
        w.append_record(generation_record("a", row=row))
    w.close()
    again = output.PartWriter(tmp_path, "a", 0)
    assert sorted(again.totals.rows) == [0, 1, 2, 3, 5]
    assert [r["row"] for r in output.iter_records(again.records_path)] == [0, 1, 2, 3, 5]
    again.close()
