"""Budget precision on the real SGLang 0.5.23 (CPU, the demo's tiny model): `bench/budget_precision.py
--server real`. What the simulator's run measures, against a real scheduler (chunked prefill, its
own batching, its HTTP and detokenizer path), in real time.

Per replica, its own `jobrunner generate` process and its own SGLang server (one OpenMP thread each,
draftgen_dev.real_sglang). Four datasets, three of short prompts (60 tokens) and one of long ones (600,
past the short class), 16 and 4 in flight per replica with 512 new tokens at most; the responses end
where the tiny model samples its EOS. A budget per dataset shared by the replicas (file coordination).

Measured per dataset and in all, every token count the server's own:
- kept / budget: the completion tokens written;
- excess: (what the servers made for the dataset - budget) / budget, where what they made for a
  request is its answer's `completion_tokens` (a cut record keeps it as `cut.generated`); the total
  is held to the servers' `/metrics` (`sglang:generation_tokens_total` over the generate phase: the
  tokenizer manager's sum of the answers it finished), and what the answers do not account for
  (requests cancelled unanswered) is printed as unattributed, with the requests the schedulers
  retracted (`sglang:num_retracted_requests_total`): a retracted request aborted while waiting
  answers less than it made (docs/budgets.md "On the real scheduler");
- utilisation: the servers' tokens over the generate phase / (capacity x wall time), the capacity
  measured in the same run on the same servers, before and after the generate phase (the mean), by
  SGLang's own `sglang.benchmark.serving` at the same concurrency (random ids, the mean prompt length, 512 tokens each, EOS ignored), both servers
  at once;
- the decode clock's error: for every request cut, what the clock said it had made when the cut
  was decided against what the server answered.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from draftgen_dev.demo_assets import build_model
from draftgen_dev.real_sglang.install import ensure_installed
from draftgen_dev.real_sglang.server import RealSGLang
from generate_processes import run_generates, write_prompts
from jobrunner.shared import output

CLASSES = ({"name": "short", "max_prompt_tokens": 256, "concurrency": 16, "max_new_tokens": 512},
           {"name": "long", "concurrency": 4, "max_new_tokens": 512})
PROMPT_TOKENS = {"short": 60, "long": 600}
CONTEXT_LEN = 2048  # the tiny model's
# Room for what the class table may lend past the concurrencies, and a KV pool that never retracts
# at this table's worst case (a retracting server is tested in tests/real_sglang, and counted here).
SERVER_ARGS = ("--enable-metrics", "--max-running-requests", "32", "--max-total-tokens", "32768")
PUBLISH_INTERVAL_S = 1.0


def datasets(work: Path, budget: int, count: int) -> list[dict]:
    out = []
    for i in range(count):
        # Three of short prompts to one of long ones, as the slots are (16 and 4): with as many of
        # each, the long ones made half the tokens on a fifth of the slots, alone for half the run.
        kind = "long" if i % 4 == 3 else "short"
        name = f"{kind}-{i // 4}" if kind == "long" else f"{kind}-{i - i // 4}"
        path = work / f"{name}.jsonl"
        write_prompts(path, max(400, budget // 50), PROMPT_TOKENS[kind], seed=i)
        out.append({"name": name, "path": str(path), "pretokenized": True, "budget_tokens": budget})
    return out


def generate_config(work: Path, model: Path, url: str, replica: int, replicas: int, ds: list[dict],
                    at_budget: str) -> Path:
    config = {
        "server_url": url, "tokenizer_path": str(model), "output_root": str(work / "out"), "run_id": "precision",
        "replica": replica, "replicas": replicas, "progress_interval_s": PUBLISH_INTERVAL_S,
        "context": {"length": CONTEXT_LEN}, "prompt_classes": list(CLASSES),
        "coordination": {"kind": "file", "directory": str(work / "coordination")},
        "at_budget": at_budget, "datasets": ds,
    }
    path = work / f"generate-r{replica:03d}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def capacity(servers: list[RealSGLang], model: Path, work: Path, when: str) -> float:
    """Output tokens/s of every server together, by sglang.benchmark.serving against each at once
    (run before and after the generate phase: on this machine the same servers measured up to 27 %
    less after a run than before it, with or without their radix cache)."""
    concurrency = sum(c["concurrency"] for c in CLASSES)
    mean_prompt = round(sum(c["concurrency"] * PROMPT_TOKENS[c["name"]] for c in CLASSES) / concurrency)

    def measure(i_server: tuple[int, RealSGLang]) -> float:
        i, server = i_server
        result = work / f"capacity-{when}-{i}.jsonl"
        subprocess.run([str(ensure_installed()), "-m", "sglang.benchmark.serving", "--backend", "sglang",
                        "--base-url", server.base_url, "--dataset-name", "random-ids", "--tokenizer", str(model),
                        "--random-input-len", str(mean_prompt), "--random-output-len", "512",
                        "--random-range-ratio", "1.0", "--num-prompts", str(2 * concurrency),
                        "--max-concurrency", str(concurrency), "--seed", str(i), "--output-file", str(result)],
                       check=True, stdout=subprocess.DEVNULL, stderr=open(work / f"capacity-{when}-{i}.log", "wb"))
        return float(json.loads(result.read_text().splitlines()[-1])["output_throughput"])

    with ThreadPoolExecutor(len(servers)) as pool:
        return sum(pool.map(measure, enumerate(servers)))


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def quantile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def run_real(replicas: int, budget: int, count: int, keep: Path | None, at_budget: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="draftgen-precision-real-") as tmp:
        work = Path(tmp) if keep is None else keep / f"real-replicas-{replicas}"
        work.mkdir(parents=True, exist_ok=True)
        model = build_model(work / "model")
        ds = datasets(work, budget, count)
        servers = []
        try:
            for r in range(replicas):  # one at a time: two starting side by side time out on two cores
                servers.append(RealSGLang(model, work / f"sglang-{r}.log", *SERVER_ARGS).start())
            before_tps = capacity(servers, model, work, "before")
            configs = [generate_config(work, model, servers[r].base_url, r, replicas, ds, at_budget)
                       for r in range(replicas)]
            before = [(s.generation_tokens(), s.retracted_requests()) for s in servers]
            peers_cpu = cpu_of_children()  # the capacity peers, reaped
            codes, wall = run_generates(work, configs)
            client_cpu = cpu_of_children() - peers_cpu
            generated = sum(s.generation_tokens() - b for s, (b, _) in zip(servers, before))
            retracted = sum(s.retracted_requests() - b for s, (_, b) in zip(servers, before))
            after_tps = capacity(servers, model, work, "after")
        finally:
            for s in servers:
                s.stop()
        if any(codes):
            raise SystemExit(f"generate exited {codes}: see {work}")
        tps = (before_tps + after_tps) / 2
        return {**summarise(work, ds, budget, replicas, generated, tps, wall, client_cpu), "retracted": retracted,
                "capacity_span": (before_tps, after_tps)}


def summarise(work: Path, ds: list[dict], budget: int, replicas: int, generated: float, tps: float, wall: float,
              cpu_s: float) -> dict:
    rows, errors = [], []
    for d in ds:
        records = [r for p in output.record_files(work / "out", d["name"]) for r in output.iter_records(p)]
        kept = sum(r["completion_tokens"] for r in records)
        made = sum(r["cut"]["generated"] if r.get("cut") else r["completion_tokens"] for r in records)
        cut = [r for r in records if r.get("cut_at_budget")]
        errors += [(r["cut"]["estimated"], r["cut"]["generated"]) for r in cut if r["cut"]["estimated"] is not None]
        rows.append({"dataset": d["name"], "kept": kept / budget, "excess": (made - budget) / budget,
                     "samples": len(records), "cut_samples": len(cut),
                     "cut_tokens": sum(r["completion_tokens"] for r in cut) / max(1, kept), "made": made})
    attributed = sum(r["made"] for r in rows)
    return {"replicas": replicas, "budget": budget, "rows": rows, "wall_s": wall, "capacity_tps": tps,
            "generated": generated, "unattributed": generated - attributed,
            "excess": (generated - budget * len(ds)) / (budget * len(ds)),
            "utilisation": generated / (tps * wall), "clock": errors, "cpu_s": cpu_s}


def show(result: dict) -> None:
    before, after = result["capacity_span"]
    print(f"\nreal SGLang 0.5.23, {result['replicas']} replica(s): {result['wall_s']:.1f} s, capacity "
          f"{result['capacity_tps']:.0f} tokens/s (sglang.benchmark.serving on the same servers at the same "
          f"concurrency: {before:.0f} before the run, {after:.0f} after)")
    print(f"  {'dataset':<10} {'kept/budget':>12} {'excess':>9} {'cut samples':>12} {'cut tokens':>11}")
    for r in result["rows"]:
        print(f"  {r['dataset']:<10} {r['kept']:>12.4f} {100 * r['excess']:>8.2f}% "
              f"{r['cut_samples']:>5} / {r['samples']:<5} {100 * r['cut_tokens']:>10.1f}%")
    excess = [r["excess"] for r in result["rows"]]
    print(f"  median excess {100 * statistics.median(excess):.2f}%, worst {100 * max(excess):.2f}%; over all "
          f"datasets by /metrics {100 * result['excess']:.2f}% ({result['unattributed']:.0f} tokens no answer "
          f"accounts for, {result['retracted']:.0f} requests retracted); utilisation {result['utilisation']:.3f} "
          f"({result['utilisation'] * result['capacity_tps'] / before:.3f} against the capacity before the run, "
          f"{result['utilisation'] * result['capacity_tps'] / after:.3f} after)")
    kept = sum(r["kept"] for r in result["rows"]) * result["budget"]
    cut = sum(r["cut_tokens"] * r["kept"] for r in result["rows"]) / max(1e-9, sum(r["kept"] for r in result["rows"]))
    print(f"  cut at the budget: {100 * cut:.1f}% of the kept tokens; generate processes' CPU "
          f"{1000 * result['cpu_s'] / kept:.4f} s per 1,000 kept tokens")
    clock = result["clock"]
    if clock:
        over = [e - g for e, g in clock]
        relative = [(e - g) / g for e, g in clock if g]
        print(f"  decode clock at the cut, {len(clock)} requests, clock - server: median {quantile(over, 0.5):+.0f} "
              f"tokens (p10 {quantile(over, 0.1):+.0f}, p90 {quantile(over, 0.9):+.0f}); relative median "
              f"{100 * quantile(relative, 0.5):+.1f}% (p10 {100 * quantile(relative, 0.1):+.1f}%, p90 "
              f"{100 * quantile(relative, 0.9):+.1f}%); summed {sum(e for e, _ in clock)} against "
              f"{sum(g for _, g in clock)}")
