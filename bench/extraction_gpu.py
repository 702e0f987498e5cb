"""Extraction tokens/s of the two backends on a GPU, on the same random weights and the same data:
the check `jobrunner extract --backend sglang` waits for (docs/eagle3.md#the-sglang-backend).

    python3 bench/extraction_gpu.py                      # Llama-3.1-8B's shape, one GPU, bf16
    python3 bench/extraction_gpu.py --shape qwen2.5-32b  # a bigger dense shape that fits 80 GB
    python3 bench/extraction_gpu.py --tp 8 --shape ...   # SGLang over 8 GPUs (transformers: device_map auto)
    python3 bench/extraction_gpu.py --shape tiny --device cpu --sglang-python PATH   # a smoke run, no GPU

Needs a Python with CUDA torch, transformers and SGLang 0.5.23 (an SGLang image has all three; the
GPU machines lent to draftgen's sessions have no SGLang and cannot fetch it). Run from the checkout:
workers import jobrunner from it.

What it does: writes a config of a real model family's shape and random bf16 weights for it (both
backends load the same checkpoint, so their states can be compared too), seeded random prompts of
`--min-len` to `--max-len` tokens, then runs each backend in a process of its own (SGLang's parallel
runtime starts once per process; a fresh process also frees the GPU between them): the batches
`jobrunner extract` would plan (`selection.plan_batches`, `--max-batch-tokens`), one warm-up batch, then
every batch timed, the states copied to the host as extraction stores them. Prints tokens/s of each,
their ratio, the largest difference between their states on the first batch, and what 10,000
tokens/s per node (the goal) would need at this rate.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL_TPS_PER_NODE = 10_000
# Published configs' shapes (num_hidden_layers, hidden_size, intermediate_size, heads, kv heads, vocab).
SHAPES = {
    "llama-3.1-8b": (32, 4096, 14336, 32, 8, 128256),
    "qwen2.5-32b": (64, 5120, 27648, 40, 8, 152064),
    "tiny": (8, 64, 128, 4, 2, 1024),
}
CPU_SERVER_ARGS = ["--device", "cpu", "--attention-backend", "torch_native", "--max-total-tokens", "16384"]


def write_checkpoint(directory: Path, shape: str, device: str) -> Path:
    """A Llama-architecture checkpoint of `shape` with seeded random bf16 weights."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    layers, hidden, intermediate, heads, kv_heads, vocab = SHAPES[shape]
    config = LlamaConfig(num_hidden_layers=layers, hidden_size=hidden, intermediate_size=intermediate,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
                         max_position_embeddings=16384, rope_theta=500000.0, torch_dtype="bfloat16")
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(directory, safe_serialization=True)
    del model
    return directory


def prompts(total_tokens: int, low: int, high: int, vocab: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    out, made = [], 0
    while made < total_tokens:
        ids = [rng.randrange(3, vocab) for _ in range(rng.randint(low, high))]
        out.append(ids)
        made += len(ids)
    return out


def worker(kind: str, model: str, prompts_path: str, result_path: str, max_batch_tokens: int, max_batch_size: int,
           tp: int, device: str) -> None:
    """One backend over every batch (in its own process); writes tokens/s and the first batch's states."""
    import torch

    from jobrunner.hidden_states import selection

    sequences = json.loads(Path(prompts_path).read_text())
    if kind == "sglang":
        from jobrunner.hidden_states.sglang_backend import SGLangBackend

        backend = SGLangBackend(model, None, "post-norm", "bf16", tp_size=tp, max_batch_size=max_batch_size,
                                server_args=CPU_SERVER_ARGS if device == "cpu" else [])
    else:
        from jobrunner.hidden_states.transformers_backend import TransformersBackend

        backend = TransformersBackend(model, None, dtype="bf16", device=device,
                                      device_map="auto" if tp > 1 else None)
    batches = [[sequences[i] for i in b]
               for b in selection.plan_batches([len(s) for s in sequences], max_batch_tokens, max_batch_size)]
    first = backend.extract(batches[0])  # warm-up, and the states the two backends are compared on
    torch.save([(s.aux, s.final) for s in first], result_path + ".states")
    started = time.perf_counter()
    tokens = 0
    for batch in batches[1:]:
        backend.extract(batch)
        tokens += sum(len(s) for s in batch)
    elapsed = time.perf_counter() - started
    getattr(backend, "close", lambda: None)()
    Path(result_path).write_text(json.dumps({"tokens": tokens, "seconds": elapsed, "batches": len(batches) - 1}))


def run_worker(python: str, kind: str, args, model: Path, prompts_path: Path, work: Path) -> dict:
    result = work / f"{kind}.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if args.device == "cpu":
        env.update(SGLANG_PLATFORM="draftgen_cpu", CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    code = (f"import sys; sys.path.insert(0, {str(REPO / 'bench')!r}); import extraction_gpu as b; "
            f"b.worker({kind!r}, {str(model)!r}, {str(prompts_path)!r}, {str(result)!r}, {args.max_batch_tokens}, "
            f"{args.max_batch_size}, {args.tp}, {args.device!r})")
    started = time.perf_counter()
    done = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join(line[:300] for line in done.stderr.splitlines()[-25:])
        raise SystemExit(f"{kind} worker failed ({done.returncode}):\n{tail}")
    return {**json.loads(result.read_text()), "wall_s": time.perf_counter() - started, "states": str(result) + ".states"}


def largest_difference(a_path: str, b_path: str) -> tuple[float, float]:
    import torch

    a, b = torch.load(a_path), torch.load(b_path)
    aux = max((x[0].float() - y[0].float()).abs().max().item() for x, y in zip(a, b))
    final = max((x[1].float() - y[1].float()).abs().max().item() for x, y in zip(a, b))
    return aux, final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="llama-3.1-8b")
    parser.add_argument("--tokens", type=int, default=400_000, help="prompt tokens to extract (after the warm-up)")
    parser.add_argument("--min-len", type=int, default=512)
    parser.add_argument("--max-len", type=int, default=4096)
    parser.add_argument("--max-batch-tokens", type=int, default=32768)
    parser.add_argument("--max-batch-size", type=int, default=64)
    parser.add_argument("--tp", type=int, default=1, help="GPUs: SGLang's tensor-parallel ranks, transformers' device_map")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--sglang-python", default=sys.executable, help="the interpreter with SGLang")
    parser.add_argument("--backends", default="sglang,transformers")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="extraction-gpu-") as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        model = write_checkpoint(work / "model", args.shape, args.device)
        data = prompts(args.tokens, args.min_len, args.max_len, SHAPES[args.shape][5])
        (work / "prompts.json").write_text(json.dumps(data))
        print(f"{args.shape}: {SHAPES[args.shape][:2]} (layers, hidden), random bf16 weights written in "
              f"{time.perf_counter() - started:.0f} s; {len(data)} prompts, {sum(map(len, data)):,} tokens; "
              f"batches of up to {args.max_batch_tokens} tokens / {args.max_batch_size} samples; {args.tp} GPU(s)")
        results = {}
        for kind in args.backends.split(","):
            python = args.sglang_python if kind == "sglang" else sys.executable
            results[kind] = r = run_worker(python, kind, args, model, work / "prompts.json", work)
            print(f"  {kind:12s} {r['tokens'] / r['seconds']:10,.0f} tokens/s  ({r['tokens']:,} tokens in "
                  f"{r['seconds']:.1f} s, {r['batches']} batches; process {r['wall_s']:.0f} s with the load)")
        if {"sglang", "transformers"} <= results.keys():
            s, t = (results[k]["tokens"] / results[k]["seconds"] for k in ("sglang", "transformers"))
            aux, final = largest_difference(results["sglang"]["states"], results["transformers"]["states"])
            print(f"  sglang / transformers: {s / t:.2f}; first batch, bf16: max |aux diff| {aux:.3g}, "
                  f"max |final diff| {final:.3g}")
        for kind, r in results.items():
            rate = r["tokens"] / r["seconds"]
            print(f"  {kind}: {GOAL_TPS_PER_NODE:,} tokens/s per node needs {GOAL_TPS_PER_NODE / rate:.2f} x "
                  f"this rate ({args.tp} GPU(s) at {rate:,.0f})")


if __name__ == "__main__":
    main()
