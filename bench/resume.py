"""Resume cost over an output holding 10M tokens, as a ratio to reading the file once.

    .venv/bin/python bench/resume.py [--tokens 10000000]

Writes one part file of ~1,314-token responses with `PartWriter` (10M tokens: ~7,600 records,
~60 MB), then times, best of three each:

- the peer: reading the file's bytes once (the least any resume that looks at the data must do);
- resume: opening a PartWriter on it (summary + the tail after it), goal <= 2x the peer;
- resume after a lost summary: a full rescan that parses every record (the fallback path);
- resume with a torn tail and 200 records written after the last summary.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from draftgen_contracts.generation_record import GenerationRecord, Timings
from draftgen_dev.builders import generation_record
from jobrunner.shared.output import PartWriter, part_path, summary_path

GOAL = 2.0


def record(row: int, n: int, rng: random.Random) -> GenerationRecord:
    return generation_record("bench", row, [rng.randrange(150_000) for _ in range(60)],
                             [rng.randrange(150_000) for _ in range(n)],
                             sampling_params={"temperature": 0.6, "max_new_tokens": 10240}, rid="dg-" + "0" * 29,
                             timings=Timings(0.0, 1.0, 1.7e9 + row))


def best_of(fn, n: int = 3) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def read_once(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=10_000_000)
    args = parser.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        w = PartWriter(tmp, "bench", 0)
        row = tokens = 0
        while tokens < args.tokens:
            n = max(1, min(10_240, int(rng.lognormvariate(6.155, 1.43))))  # median 471, mean ~1.3K
            w.append_record(record(row, n, rng))
            row, tokens = row + 1, tokens + n
        w.close()
        path = part_path(tmp, "bench", 0)
        size = path.stat().st_size
        print(f"{row:,} records, {tokens:,} tokens, {size / 1e6:.0f} MB")

        peer = best_of(lambda: read_once(path))
        resume = best_of(lambda: PartWriter(tmp, "bench", 0).close())
        summary = summary_path(tmp, "bench", 0)
        saved = summary.read_bytes()

        def rescan():
            summary.unlink()
            PartWriter(tmp, "bench", 0).close()
        full = best_of(rescan, n=1)
        summary.write_bytes(saved)

        def with_tail():
            w = PartWriter(tmp, "bench", 0)
            w.sync()
            for i in range(200):
                w.append_record(record(10_000_000 + i, 1300, rng))
            os.write(w._records_fd, b'{"torn')  # killed mid-line, no summary since
            os.close(w._records_fd)  # what SIGKILL leaves: descriptors (and the lock) closed, nothing synced
            os.close(w._skipped_fd)
            t = time.perf_counter()
            PartWriter(tmp, "bench", 0).close()
            return time.perf_counter() - t
        tail = with_tail()

    ratio = resume / peer
    print(f"read once (peer): {peer * 1000:.1f} ms")
    print(f"resume from the summary: {resume * 1000:.1f} ms = {ratio:.2f}x the read (goal <= {GOAL}x) -> "
          f"{'OK' if ratio <= GOAL else 'ABOVE GOAL'}")
    print(f"resume with 200 records + a torn tail after the summary: {tail * 1000:.1f} ms = {tail / peer:.2f}x")
    print(f"resume after a lost summary (full rescan, every record parsed): {full * 1000:.0f} ms = {full / peer:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
