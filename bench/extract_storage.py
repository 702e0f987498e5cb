"""Extraction storage: bytes written vs the unpadded minimum (goal 1.00), beside SpecForge's padded
layout; fp8 states against bf16 (bytes, goal about 0.5, and error).

    .venv/bin/python bench/extract_storage.py [--samples 1500] [--hidden 128]

Runs the real `jobrunner extract` (transformers backend, a tiny random Llama, bf16, CPU) over a merged
corpus whose lengths follow a long-tailed distribution (median ~470, mean ~1.3K response tokens, like
the simulator's function_calling profile, scaled down by --scale), then compares:
- written: every byte of the shards (tensors, offsets, headers);
- minimum: tokens x bytes per token, no padding, no headers;
- SpecForge padded: what storing each sample at its batch's longest length would take, for the very
  batches this run used (length-sorted, SpecForge's best case) and for batches in corpus order
  (its default); SpecForge also drops the last partial batch (`drop_last`), counted separately;
- fp8: the same extraction with `--dtype fp8` (e4m3, one float32 scale per token and state): its
  bytes against the bf16 unpadded minimum, and per state (each aux layer, the final state) the
  relative error of each token's vector against the bf16 states, ||fp8 - bf16|| / ||bf16||, mean
  and max over the tokens, read back through `load_sample` (which dequantizes).
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from draftgen_contracts.hidden_state_layout import bytes_per_token
from draftgen_dev.builders import generation_record
from draftgen_dev.tiny_model import build_tiny_llama
from jobrunner.shared import corpus
from jobrunner.merge.run import merge_corpus
from jobrunner.merge.settings import MergeSettings
from jobrunner.hidden_states.extract import extract
from jobrunner.hidden_states import selection
from jobrunner.hidden_states.extraction_settings import ExtractionSettings
from jobrunner.shared.output import PartWriter


def write_corpus(root: Path, samples: int, scale: float, seed: int = 0) -> None:
    rnd = random.Random(seed)
    w = PartWriter(root, "fc", 0)
    for row in range(samples):
        prompt = [rnd.randrange(3, 1000) for _ in range(rnd.randint(20, 120))]
        # lognormal with median 471 and mean ~1.3K: sigma = sqrt(2 ln(1314/471))
        n = max(1, int(rnd.lognormvariate(math.log(471), math.sqrt(2 * math.log(1314 / 471))) * scale))
        response = [rnd.randrange(3, 1000) for _ in range(min(n, int(10240 * scale)))]
        w.append_record(generation_record("fc", row, prompt, response, timings=None))
    w.close()


def padded_tokens(lengths: list[int], batches: list[list[int]]) -> int:
    return sum(max(lengths[i] for i in b) * len(b) for b in batches)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1500)
    ap.add_argument("--scale", type=float, default=0.25, help="response length scale (CPU time)")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=8, help="samples per batch (SpecForge's --batch-size)")
    ap.add_argument("--max-batch-tokens", type=int, default=16384)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="extract-bench-"))
    try:
        write_corpus(base, args.samples, args.scale)
        merge_corpus(base, base / "corpus", MergeSettings(eval_fraction=0.0), log=lambda *_: None)
        model = build_tiny_llama(base / "model", vocab_size=1024, num_layers=8, hidden=args.hidden)
        window = 2048
        run = ExtractionSettings(splits=("train",), max_batch_tokens=args.max_batch_tokens,
                                 max_batch_size=args.batch_size, sort_window=window, shard_mb=64)
        quiet = dict(log=lambda *_: None)
        index = extract(base / "corpus", base / "states", model, replace(run, dtype="bf16"), **quiet)
        fp8_index = extract(base / "corpus", base / "fp8", model, replace(run, dtype="fp8"), **quiet)
        lengths = [len(r["input_ids"]) for r in corpus.iter_corpus(base / "corpus", "train")]
        errors = fp8_errors(base / "states", base / "fp8", index, fp8_index)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    per_token = bytes_per_token(args.hidden, 3, "bf16")
    minimum = sum(lengths) * per_token
    written = index["bytes"]
    ours = [[w * window + i for i in b] for w in range(math.ceil(len(lengths) / window))
            for b in selection.plan_batches(lengths[w * window:(w + 1) * window], args.max_batch_tokens, args.batch_size)]
    in_order = [list(range(i, min(i + args.batch_size, len(lengths)))) for i in range(0, len(lengths), args.batch_size)]
    sorted_padded = padded_tokens(lengths, ours) * per_token
    order_padded = padded_tokens(lengths, in_order) * per_token
    dropped = len(lengths) % args.batch_size
    dropped_tokens = sum(lengths[len(lengths) - dropped:]) if dropped else 0

    print(f"{len(lengths)} samples, {sum(lengths)} tokens (median {sorted(lengths)[len(lengths) // 2]}, "
          f"max {max(lengths)}), hidden {args.hidden}, {per_token} B/token, {len(index['shards'])} shards")
    print(f"{'layout':<44} {'bytes':>14} {'vs minimum':>10}")
    print(f"{'unpadded minimum (tokens x B/token)':<44} {minimum:>14} {1.0:>10.3f}")
    print(f"{'draftgen shards, as written':<44} {written:>14} {written / minimum:>10.4f}   (goal 1.00)")
    print(f"{'SpecForge padded, same length-sorted batches':<44} {sorted_padded:>14} {sorted_padded / minimum:>10.3f}")
    print(f"{'SpecForge padded, batches in corpus order':<44} {order_padded:>14} {order_padded / minimum:>10.3f}")
    print(f"SpecForge drop_last would also lose {dropped} samples ({dropped_tokens} tokens); draftgen loses none")
    fp8_written = fp8_index["bytes"]
    print(f"\nfp8 (e4m3 + a float32 scale per token and state), {bytes_per_token(args.hidden, 3, 'fp8')} B/token:")
    print(f"  written / bf16 unpadded minimum: {fp8_written / minimum:.4f}   (goal about 0.5; "
          f"{bytes_per_token(7168, 3, 'fp8') / bytes_per_token(7168, 3, 'bf16'):.4f} at hidden size 7,168)")
    print(f"  {'state':<12} {'mean rel. error':>16} {'max rel. error':>15}")
    for state, (mean, worst) in errors.items():
        print(f"  {state:<12} {mean:>16.4f} {worst:>15.4f}")
    return 0


def fp8_errors(bf16_dir: Path, fp8_dir: Path, bf16_index: dict, fp8_index: dict) -> dict[str, tuple[float, float]]:
    """Per state: mean and max over tokens of ||fp8 - bf16|| / ||bf16||, the fp8 states dequantized."""
    import torch

    from jobrunner.hidden_states.store import load_sample

    errors: dict[str, list] = {}
    for sid in sorted(bf16_index["samples"]):
        want, got = load_sample(bf16_dir, sid, bf16_index), load_sample(fp8_dir, sid, fp8_index)
        pairs = [(f"aux {k}", want["aux_hidden_states"][:, k], got["aux_hidden_states"][:, k])
                 for k in range(want["aux_hidden_states"].shape[1])]
        pairs.append(("final", want["final_hidden_state"], got["final_hidden_state"]))
        for name, w, g in pairs:
            w, g = w.float(), g.float()
            errors.setdefault(name, []).append((g - w).norm(dim=-1) / w.norm(dim=-1).clamp(min=1e-12))
    return {name: (float(torch.cat(e).mean()), float(torch.cat(e).max())) for name, e in errors.items()}


if __name__ == "__main__":
    sys.exit(main())
