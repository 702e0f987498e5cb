"""What the budget benchmarks share (bench/budget_precision.py, budget_precision_real.py): their
pretokenized prompt files, and `jobrunner generate` processes run side by side."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path


def write_prompts(path: Path, rows: int, prompt_len: int, seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(rows):
            f.write(json.dumps({"input_ids": [rng.randrange(3, 500) for _ in range(prompt_len)]}) + "\n")


def run_generates(work: Path, configs: list[Path]) -> tuple[list[int], float]:
    """One `jobrunner generate` process per replica's config, side by side: their exit codes and
    the wall time from their spawn to the last one's exit (imports and connection included)."""
    started = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-m", "jobrunner.cli", "generate", "--config", str(c)],
                              stdout=subprocess.DEVNULL, stderr=open(work / f"generate-{i}.log", "wb"))
             for i, c in enumerate(configs)]
    return [p.wait() for p in procs], time.monotonic() - started
