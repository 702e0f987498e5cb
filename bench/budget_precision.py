"""Budget precision with several replicas: how many tokens the servers generate per dataset, kept or
thrown away, against its budget.

    .venv/bin/python bench/budget_precision.py [--replicas 1,2,4] [--budget 1000000] [--total-tps 100000]
        [--at-budget cut|abort] [--hog N]
    .venv/bin/python bench/budget_precision.py --server real [--replicas 2] [--budget 60000] [--datasets 4]

Per replica, its own `jobrunner generate` process and its own simulator process. Ten datasets with
the reference run's length profiles (function calling, code, math, chat, SWE, twice each; the SWE
prompts are long, the rest short), short and long classes at 150 and 32 in flight per replica with
10,240 and 16,384 new tokens at most, a budget per dataset shared by the replicas.

Coordination: the file coordination (each replica reads the others' progress files), with the
cluster's publish interval. In a cluster the totals reach a replica through the operator's fold
(+ up to one fold interval, 2 s) and the status read: staler, so this measures a lower bound of the
cluster's staleness term. Time is scaled: every simulator runs `speedup` times faster than real
SGLang would (10,000 tokens/s per replica, 100 per request) and the progress interval is
1 s / speedup, so every ratio (budget to concurrency x length, to rate x staleness) is the real
run's while the run takes 1/speedup of the time. The speedup is chosen so that all replicas
together make `--total-tps` real tokens/s, what two cores carry without starving a process.

Printed per dataset and in all:
- kept / budget: completion tokens of the responses written (what the corpus gets);
- excess = (every token the servers generated for the dataset - budget) / budget, which counts the
  kept tokens over the budget and the partial work of aborted requests alike;
- aborted: the partial work of the aborted requests / budget;
- utilisation: tokens generated / (the servers' capacity x the wall time of the run), dataset
  switches and the last dataset's tail included;
- kept tokens / capacity: what the GPU time bought, with the excess and the idle servers alike
  counted against it (utilisation / (1 + excess) over the run);
- cut: the kept tokens and samples of responses cut at the budget (`--at-budget cut`, the
  default), which the corpus keeps marked truncated.
`--server real` runs each replica against a real SGLang 0.5.23 on the CPU instead, in real time
(bench/budget_precision_real.py says what it measures).

`--hog N` runs N busy processes beside the replicas for the whole run (a generate container on a
node it shares, throttled, or paused by its garbage collector): the client then acts late, and
what it makes past a share before it acts is the excess the server-side bounds must hold.
Goals: at 1M per dataset and 4 replicas, median excess <= 1 %, worst <= 2 %, utilisation
>= 0.95.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from draftgen_dev.sim_process import SimulatorProcess
from generate_processes import run_generates, write_prompts
from jobrunner.shared.output import read_summary

PROFILES = ("function_calling", "code", "math", "chat", "swe")
LONG_PROMPT_PROFILES = {"swe"}  # SWE agent traces: prompts past the short class
REAL_CAPACITY_TPS = 10_000.0  # one replica's decode throughput, the scale the timing is kept at
REAL_PER_REQUEST_TPS = 100.0
PUBLISH_INTERVAL_S = 1.0  # the generation pods' report interval
MEDIAN_EXCESS_GOAL, WORST_EXCESS_GOAL, UTILISATION_GOAL = 0.01, 0.02, 0.95


def datasets(work: Path, budget: int, rows: int) -> list[dict]:
    out = []
    for i in range(10):
        profile = PROFILES[i % len(PROFILES)]
        name = f"{profile.replace('_', '-')}-{i // len(PROFILES)}"
        path = work / f"{name}.jsonl"
        long = profile in LONG_PROMPT_PROFILES
        write_prompts(path, rows // 3 if long else rows, 2100 if long else 60, seed=i)
        out.append({"name": name, "path": str(path), "pretokenized": True, "budget_tokens": budget,
                    "extra_request_fields": {"sim_profile": profile, "sim_label": name}})
    return out


def generate_config(work: Path, url: str, replica: int, replicas: int, ds: list[dict], speedup: float,
                    at_budget: str) -> Path:
    config = {
        "server_url": url, "output_root": str(work / "out"), "run_id": "precision", "replica": replica,
        "replicas": replicas, "progress_interval_s": PUBLISH_INTERVAL_S / speedup,
        "context": {"length": 32_768},
        "prompt_classes": [{"name": "short", "max_prompt_tokens": 2048, "concurrency": 150, "max_new_tokens": 10_240},
                           {"name": "long", "concurrency": 32, "max_new_tokens": 16_384}],
        "coordination": {"kind": "file", "directory": str(work / "coordination")},
        "at_budget": at_budget,
        "datasets": ds,
    }
    path = work / f"generate-r{replica:03d}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


HOG = "while True: pass"


def start_hogs(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(count)]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def run_once(replicas: int, budget: int, total_tps: float, rows: int, count: int, keep: Path | None,
             at_budget: str, hogs: int = 0) -> dict:
    speedup = total_tps / (REAL_CAPACITY_TPS * replicas)
    with tempfile.TemporaryDirectory(prefix="draftgen-precision-") as tmp:
        work = Path(tmp) if keep is None else keep / f"replicas-{replicas}"
        work.mkdir(parents=True, exist_ok=True)
        ds = datasets(work, budget, rows)[:count]
        capacity = REAL_CAPACITY_TPS * speedup
        sims = [SimulatorProcess(sample_s=1.0, capacity_tps=capacity, per_request_tps=REAL_PER_REQUEST_TPS * speedup,
                                 context_len=32_768, max_running_requests=512, disconnect_poll_s=4.0 / speedup,
                                 seed=r) for r in range(replicas)]
        hogging = start_hogs(hogs)
        try:
            configs = [generate_config(work, sims[r].base_url, r, replicas, ds, speedup, at_budget)
                       for r in range(replicas)]
            codes, wall = run_generates(work, configs)
            # Reaped so far: the generate processes only (the simulators and hogs are still running).
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            client_cpu = usage.ru_utime + usage.ru_stime
            stats = [s.stats() for s in sims]
        finally:
            stop(hogging)
            for s in sims:
                s.stop()
        if any(codes):
            raise SystemExit(f"generate exited {codes}: see {work}")
        return {**summarise(work, ds, budget, replicas, stats, wall, capacity), "client_cpu_s": client_cpu}


def summarise(work: Path, ds: list[dict], budget: int, replicas: int, stats: list[dict], wall: float,
              capacity: float) -> dict:
    rows = []
    for d in ds:
        name = d["name"]
        parts = [s for r in range(replicas) if (s := read_summary(work / "out", name, r)) is not None]
        kept = sum(s.completion_tokens for s in parts)
        generated = sum(s["tokens_by_label"].get(name, 0) for s in stats)
        aborted = sum(s["aborted_tokens_by_label"].get(name, 0) for s in stats)
        rows.append({"dataset": name, "kept": kept / budget, "excess": (generated - budget) / budget,
                     "aborted": aborted / budget, "samples": sum(s.records for s in parts),
                     "cut_samples": sum(s.cut_records for s in parts),
                     "cut_tokens": sum(s.cut_tokens for s in parts) / max(1, kept)})
    generated = sum(s["tokens_generated_total"] for s in stats)
    kept = sum(r["kept"] for r in rows) * budget
    return {"replicas": replicas, "budget": budget, "rows": rows, "wall_s": wall, "speedup": capacity / REAL_CAPACITY_TPS,
            "utilisation": generated / (capacity * replicas * wall), "efficiency": kept / (capacity * replicas * wall),
            "cut_samples": sum(r["cut_samples"] for r in rows) / max(1, sum(r["samples"] for r in rows)),
            "cut_tokens": sum(r["cut_tokens"] * r["kept"] for r in rows) / max(1e-9, sum(r["kept"] for r in rows))}


def show(result: dict, hogs: int) -> None:
    beside = f", {hogs} busy processes beside them" if hogs else ""
    print(f"\n{result['replicas']} replica(s): {result['wall_s']:.1f} s at {result['speedup']:g}x real time{beside}")
    print(f"  {'dataset':<20} {'kept/budget':>12} {'excess':>9} {'aborted':>9} {'cut samples':>12} {'cut tokens':>11}")
    for r in result["rows"]:
        print(f"  {r['dataset']:<20} {r['kept']:>12.4f} {100 * r['excess']:>8.2f}% {100 * r['aborted']:>8.2f}% "
              f"{r['cut_samples']:>5} / {r['samples']:<5} {100 * r['cut_tokens']:>10.1f}%")
    excess = [r["excess"] for r in result["rows"]]
    median, worst = statistics.median(excess), max(excess)
    print(f"  median excess {100 * median:.2f}% (goal <= {100 * MEDIAN_EXCESS_GOAL:.0f}%), worst "
          f"{100 * worst:.2f}% (goal <= {100 * WORST_EXCESS_GOAL:.0f}%), utilisation {result['utilisation']:.3f} "
          f"(goal >= {UTILISATION_GOAL}), kept tokens / capacity {result['efficiency']:.3f}")
    print(f"  cut at the budget: {100 * result['cut_samples']:.1f}% of the samples, "
          f"{100 * result['cut_tokens']:.1f}% of the kept tokens")
    kept = sum(r["kept"] for r in result["rows"]) * result["budget"]
    print(f"  client CPU: {result['client_cpu_s']:.1f} s over the generate processes, "
          f"{1000 * result['client_cpu_s'] / kept:.4f} s per 1,000 kept tokens")
    low = [r["dataset"] for r in result["rows"] if r["kept"] < 1.0]
    if low:
        print(f"  BELOW BUDGET (rows remained): {low}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=("simulator", "real"), default="simulator")
    parser.add_argument("--replicas", default=None, help="comma-separated replica counts to run (1,2,4; real: 2)")
    parser.add_argument("--budget", type=int, default=None, help="tokens per dataset (1,000,000; real: 60,000, about three minutes of the two CPU servers)")
    parser.add_argument("--total-tps", type=float, default=100_000.0,
                        help="tokens/s of all the simulators together, in real time (sets the speedup)")
    parser.add_argument("--rows", type=int, default=None,
                        help="prompts per dataset (default: enough that none runs out, 4 per 1,000 tokens of budget)")
    parser.add_argument("--datasets", type=int, default=None, help="the first N of the ten datasets (real: 4)")
    parser.add_argument("--at-budget", choices=("cut", "abort"), default="cut",
                        help="what happens to the requests in flight at a replica's part of the budget")
    parser.add_argument("--hog", type=int, default=0, help="busy processes beside the replicas (a loaded node)")
    parser.add_argument("--keep", type=Path, default=None, help="leave the run's files (logs, output) here")
    args = parser.parse_args()
    if args.server == "real":
        from budget_precision_real import run_real, show as show_real

        for replicas in (int(n) for n in (args.replicas or "2").split(",")):
            show_real(run_real(replicas, args.budget or 60_000, args.datasets or 4, args.keep, args.at_budget))
        return 0
    args.budget, args.datasets = args.budget or 1_000_000, args.datasets or 10
    rows = args.rows or max(3000, 4 * args.budget // 1000)
    for replicas in (int(n) for n in (args.replicas or "1,2,4").split(",")):
        show(run_once(replicas, args.budget, args.total_tps, rows, args.datasets, args.keep, args.at_budget,
                      args.hog), args.hog)
    return 0


if __name__ == "__main__":
    sys.exit(main())
