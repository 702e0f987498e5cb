"""Merge memory and throughput: peak RSS at two corpus sizes (it must not grow) and time vs one read.

    .venv/bin/python bench/merge_memory.py [--size-gb 2] [--small-gb 0.25] [--memory-limit-mb 512]

For each size it writes synthetic generation output (contract format, docs/contracts.md; unique
token content per record, responses of ~1.5K tokens), then in a fresh process each:
- reads every record once with `jobrunner.shared.output.iter_records` (the peer: the least any merge must do),
- runs `jobrunner merge` (dedupe, shuffle, split, shards, manifest),
and prints peak RSS against the 512 MB goal and merge time as a ratio to the read.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from jobrunner.merge.run import merge_corpus
from jobrunner.merge.settings import MergeSettings
from jobrunner.shared.output import iter_records, record_files
mode, root, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = time.perf_counter()
if mode == "read":
    n = sum(1 for p in record_files(root) for _ in iter_records(p))
else:
    n = merge_corpus(root, root + "/corpus", MergeSettings(memory_limit_mb=limit), log=lambda *_: None)["samples"]
print(json.dumps({"seconds": time.perf_counter() - t, "records": n,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_synthetic(root: Path, size_bytes: int, seed: int = 0) -> int:
    """Records whose responses are shared chunks behind a per-record head, so writing is fast and every
    record's content is unique (nothing is deduplicated away)."""
    rnd = random.Random(seed)
    chunks = [",".join(str(rnd.randrange(1000, 160000)) for _ in range(rnd.randint(200, 3000))) for _ in range(64)]
    prompts = [[rnd.randrange(1000, 160000) for _ in range(rnd.randint(20, 400))] for _ in range(64)]
    written = records = 0
    files = {}
    try:
        for d in range(8):
            path = root / "generate" / f"ds{d}" / "part-r000.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            files[d] = open(path, "w", buffering=1 << 20)
        while written < size_bytes:
            d, row = records % 8, records // 8
            chunk = rnd.choice(chunks)
            head = [records % 997 + 3, records // 997 + 3, 7]
            prompt = rnd.choice(prompts)
            n_out = 3 + chunk.count(",") + 1
            finish = "length" if records % 23 == 0 else "stop"
            line = (f'{{"sample_id":"ds{d}/{row:09d}","dataset":"ds{d}","row":{row},'
                    f'"input_ids":{json.dumps(prompt, separators=(",", ":"))},'
                    f'"output_ids":[{head[0]},{head[1]},{head[2]},{chunk}],"finish_reason":"{finish}",'
                    f'"prompt_tokens":{len(prompt)},"completion_tokens":{n_out},"prompt_class":"short",'
                    f'"sampling_params":{{"max_new_tokens":4096}},"rid":"r{records:012d}",'
                    f'"timings":{{"queued_s":0.0,"e2e_s":1.0,"finished_at":{1000 + records}}}}}\n')
            files[d].write(line)
            written += len(line)
            records += 1
    finally:
        for f in files.values():
            f.close()
    return records


def child(mode: str, root: Path, limit: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(root), str(limit)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--small-gb", type=float, default=0.25)
    ap.add_argument("--memory-limit-mb", type=int, default=512)
    ap.add_argument("--workdir", help="where the synthetic data goes (default: a temp dir, removed after)")
    args = ap.parse_args()
    base = Path(args.workdir or tempfile.mkdtemp(prefix="merge-bench-"))
    rows = []
    try:
        for gb in (args.small_gb, args.size_gb):
            root = base / f"{gb}gb"
            shutil.rmtree(root, ignore_errors=True)
            records = write_synthetic(root, int(gb * 1e9))
            read = child("read", root, args.memory_limit_mb)
            merged = child("merge", root, args.memory_limit_mb)
            assert merged["records"] == records, (merged, records)
            rows.append((gb, records, read, merged))
            shutil.rmtree(root)
    finally:
        if not args.workdir:
            shutil.rmtree(base, ignore_errors=True)
    print(f"{'input':>8} {'records':>9} {'read s':>8} {'merge s':>8} {'merge/read':>10} {'read RSS':>9} "
          f"{'merge RSS':>10} {'RSS/limit':>9}")
    for gb, records, read, merged in rows:
        print(f"{gb:>6.2f}GB {records:>9} {read['seconds']:>8.1f} {merged['seconds']:>8.1f} "
              f"{merged['seconds'] / read['seconds']:>10.2f} {read['peak_rss_mb']:>7.0f}MB {merged['peak_rss_mb']:>8.0f}MB "
              f"{merged['peak_rss_mb'] / args.memory_limit_mb:>9.2f}")
    small, large = rows[0][3]["peak_rss_mb"], rows[1][3]["peak_rss_mb"]
    print(f"peak RSS growth {args.size_gb / args.small_gb:.0f}x corpus: {large / small:.2f}x "
          f"(goal: <= {args.memory_limit_mb} MB at both sizes: {'met' if large <= args.memory_limit_mb else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
