"""Waste around a budget: tokens generated past the last stop decision, time until the last abort,
and the partial work of the requests aborted and not kept.

    .venv/bin/python bench/budget_waste.py [--capacity-tps 30000] [--budget 300000] [--at-budget cut|abort]

The simulator runs in its own process (150 requests in flight, function-calling length profile)
and samples its counters every 5 ms on CLOCK_MONOTONIC, shared with this process. The engine runs
here; the moment it stops requests is taken from its own decisions (its `on_action` hook): the stop
at the budget (aborting) or the last cut (cutting, docs/budgets.md). Printed:

- tokens the simulator generated after that decision, as a share of the budget (goal <= 1%);
- seconds from it until nothing of the dataset runs on the server (goal <= 1 s);
- the partial work thrown away: every token the simulator generated for a request that ended
  aborted, less what the responses cut at the budget kept of it, as a share of the budget (goal
  <= 10% at this budget; aborting, it holds about one wave of in-flight requests, so it shrinks as
  a share of larger budgets);
- every token generated over the budget (the excess), and the kept tokens in cut responses.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from draftgen_dev.sim_process import SimulatorProcess
from jobrunner.shared.config import parse_config
from jobrunner.shared.coordination import FileCoordinator
from jobrunner.generate.actions import Cut, Stop
from jobrunner.generate.engine import Engine
from jobrunner.sglang.client import SGLangClient

WASTE_GOAL = 0.01
ABORT_GOAL_S = 1.0
ABORTED_PARTIAL_GOAL = 0.10


async def run(args, work: Path, url: str) -> tuple[float, int]:
    prompts = work / "prompts.jsonl"
    with open(prompts, "w") as f:
        for i in range(args.rows):
            f.write(json.dumps({"input_ids": [100 + i % 900, 7, 8, 9, i % 50]}) + "\n")
    config = parse_config({
        "server_url": url, "output_root": str(work / "out"), "progress_interval_s": 1.0,
        "prompt_classes": [{"name": "short", "concurrency": 150, "max_new_tokens": 10_240}],
        "datasets": [{"name": "bench", "path": str(prompts), "pretokenized": True, "budget_tokens": args.budget}],
        "at_budget": args.at_budget,
    })
    decided: list[float] = []

    def timed(dataset: str, action) -> None:
        # The engine's own decisions to stop requests: the stop at the budget with requests in
        # flight (aborting), or a cut (cutting).
        if isinstance(action, Cut) or (isinstance(action, Stop) and action.rids):
            decided.append(time.monotonic())

    async with SGLangClient(url, max_connections=214) as client:
        engine = Engine(config, client, FileCoordinator(work / "coord", 0), on_action=timed)
        await engine.run()
    return decided[-1], engine.writers["bench"].totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity-tps", type=float, default=30_000.0)
    parser.add_argument("--budget", type=int, default=300_000)
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--at-budget", choices=("cut", "abort"), default="cut")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, SimulatorProcess(
        profile="function_calling", capacity_tps=args.capacity_tps, per_request_tps=1.05 * args.capacity_tps / 150,
        max_running_requests=256, seed=3, sample_s=0.005,
    ) as sim:
        crossed_at, totals = asyncio.run(run(args, Path(tmp), sim.base_url))
        time.sleep(0.2)
        samples = sim.samples()
    before = [s for t, s in samples if t <= crossed_at]
    after = [(t, s) for t, s in samples if t > crossed_at]
    at_crossing = before[-1]["tokens_generated_total"] if before else 0
    final = samples[-1][1]["tokens_generated_total"]
    idle = next((t for t, s in after if s["running"] + s["queued"] == 0), None)
    waste = (final - at_crossing) / args.budget
    aborted_partial = samples[-1][1]["tokens_generated_by_aborted"] - totals.cut_tokens
    partial = aborted_partial / args.budget
    print(f"budget {args.budget:,} tokens, kept {totals.completion_tokens:,} ({totals.cut_tokens:,} of them in "
          f"{totals.cut_records} responses cut at the budget); at the budget: {args.at_budget}; sampled every 5 ms")
    print(f"excess (every token generated over the budget): {final - args.budget:,} tokens = "
          f"{100 * (final - args.budget) / args.budget:.2f}% of the budget")
    print(f"generated after the last stop decision: {final - at_crossing:,} tokens = {100 * waste:.3f}% of the budget "
          f"(goal <= {100 * WASTE_GOAL:.0f}%) -> {'OK' if waste <= WASTE_GOAL else 'ABOVE GOAL'}")
    if idle is None:
        print("the server never went idle after the last stop decision -> FAILED")
        return 1
    print(f"last stop decision to last abort: {idle - crossed_at:.3f} s (goal <= {ABORT_GOAL_S} s) -> "
          f"{'OK' if idle - crossed_at <= ABORT_GOAL_S else 'ABOVE GOAL'}")
    print(f"partial work aborted and not kept: {aborted_partial:,} tokens = {100 * partial:.1f}% of the budget "
          f"(goal <= {100 * ABORTED_PARTIAL_GOAL:.0f}%) -> {'OK' if partial <= ABORTED_PARTIAL_GOAL else 'ABOVE GOAL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
