"""Throughput of `jobrunner generate` against the simulator's configured capacity.

    .venv/bin/python bench/generate_throughput.py [--capacity-tps 30000] [--seconds 20]

The simulator runs in its own process with a server-wide capacity of C tokens/s and a per-request
speed of 1.05 * C / 150, so it is saturated only while the client keeps at least ~143 of its 150
requests in flight: the ratio measures how well the client keeps the server full. The engine runs
in this process at concurrency 150 over chat prompts (real tokenizer, real chat template) with the
reference length profile (function calling: median 471, mean 1,314 tokens) until a budget of
C * seconds tokens is met. Printed:

- server utilisation = tokens the simulator generated / (C * wall time of the run), goal >= 0.95;
- kept tokens/s (completed responses only) for reference;
- the client's CPU seconds per 1,000 output tokens (this process only; the simulator is elsewhere).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from draftgen_dev.sim_process import SimulatorProcess
from draftgen_dev.tiny_model import build_tiny_tokenizer
from jobrunner.shared.config import parse_config
from jobrunner.shared.coordination import FileCoordinator
from jobrunner.generate.engine import Engine
from jobrunner.shared.prompts import load_tokenizer
from jobrunner.sglang.client import SGLangClient

GOAL = 0.95
CONCURRENCY = 150


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def run(args, work: Path, url: str) -> tuple[float, float, int]:
    prompts = work / "prompts.jsonl"
    with open(prompts, "w") as f:
        for i in range(args.rows):
            f.write(json.dumps({"messages": [{"role": "system", "content": "You are helpful."},
                                             {"role": "user", "content": f"Request {i}: call get_weather for city {i}."}],
                                "tools": [{"type": "function", "function": {"name": "get_weather"}}]}) + "\n")
    budget = int(args.capacity_tps * args.seconds)
    config = parse_config({
        "server_url": url, "output_root": str(work / "out"), "tokenizer_path": build_tiny_tokenizer(work / "tok"),
        "progress_interval_s": 2.0,
        "prompt_classes": [{"name": "short", "concurrency": CONCURRENCY, "max_new_tokens": 10_240}],
        "datasets": [{"name": "bench", "path": str(prompts), "budget_tokens": budget,
                      "sampling_params": {"temperature": 0.6}}],
    })
    tokenizer = load_tokenizer(config.tokenizer_path)
    async with SGLangClient(url, max_connections=CONCURRENCY + 64) as client:
        engine = Engine(config, client, FileCoordinator(work / "coord", 0), tokenizer)
        cpu0, t0 = cpu_seconds(), time.monotonic()
        await engine.run()
        wall, cpu = time.monotonic() - t0, cpu_seconds() - cpu0
    return wall, cpu, engine.writers["bench"].totals.completion_tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity-tps", type=float, default=30_000.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rows", type=int, default=3000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, SimulatorProcess(
        profile="function_calling", capacity_tps=args.capacity_tps,
        per_request_tps=1.05 * args.capacity_tps / CONCURRENCY, max_running_requests=256, seed=1,
        sample_s=0.5,
    ) as sim:
        wall, cpu, kept = asyncio.run(run(args, Path(tmp), sim.base_url))
        generated = sim.stats()["tokens_generated_total"]
    utilisation = generated / (args.capacity_tps * wall)
    print(f"wall {wall:.1f}s, simulator generated {generated:,} tokens, kept {kept:,}")
    print(f"server utilisation: {utilisation:.3f} of capacity {args.capacity_tps:,.0f} tok/s "
          f"(goal >= {GOAL}) -> {'OK' if utilisation >= GOAL else 'BELOW GOAL'}")
    print(f"kept tokens/s: {kept / wall:,.0f} ({kept / wall / args.capacity_tps:.3f} of capacity)")
    print(f"client CPU: {cpu:.2f}s, {1000 * cpu / max(kept, 1):.4f} CPU s per 1,000 output tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
