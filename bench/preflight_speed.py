"""Preflight speed: rows per second of `jobrunner preflight` over the quickstart's three datasets
(chat, tool calls, ShareGPT Parquet) with the tiny model's real tokenizer, against its peer measured in
the same run: one bare pass of the tokenizer's chat template over the same conversations (what any
check that tokenizes every prompt must pay). The goal is one pass: preflight / peer <= 1.5.
`--model kimi-like`: the same over the model built like Kimi-K2.5 (draftgen_dev.kimi_like: a slow
tiktoken tokenizer loaded as the folder's own code), whose own apply_chat_template is then the peer.

    .venv/bin/python bench/preflight_speed.py [--rows 5000] [--model tiny|kimi-like]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from draftgen_dev.demo_assets import build_model, write_datasets
from draftgen_dev.kimi_like import build_kimi_like
from jobrunner.shared.config import parse_config
from jobrunner.shared.datasets import Conversation, read_rows
from jobrunner.preflight.run import run_preflight
from jobrunner.shared.prompts import load_tokenizer, render_conversation

GOAL = 1.5


def best_of(fn, n: int = 3) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000, help="rows per dataset")
    parser.add_argument("--model", choices=["tiny", "kimi-like"], default="tiny")
    args = parser.parse_args()
    trusted = args.model == "kimi-like"
    with tempfile.TemporaryDirectory() as tmp:
        model = (build_kimi_like if trusted else build_model)(Path(tmp) / "model")
        paths = write_datasets(Path(tmp) / "prompts", rows_per_dataset=args.rows)
        config = parse_config({
            "server_url": "http://127.0.0.1:1", "output_root": tmp, "tokenizer_path": str(model),
            "trust_remote_code": trusted,
            "prompt_classes": [{"name": "short", "max_prompt_tokens": 512, "concurrency": 16, "max_new_tokens": 400},
                               {"name": "long", "concurrency": 4, "max_new_tokens": 600}],
            "datasets": [{"name": n, "path": str(p), "budget_tokens": 20000} for n, p in paths.items()]})
        findings = run_preflight(config, str(model))
        assert findings.problem is None, findings.problem
        rows = sum(d.rows for d in findings.datasets)
        tokenizer = load_tokenizer(model, trusted)
        conversations = [r for p in paths.values() for r in read_rows(p) if isinstance(r, Conversation)]

        def peer():
            for c in conversations:
                render_conversation(tokenizer, c, {})

        preflight_s = best_of(lambda: run_preflight(config, str(model)))
        peer_s = best_of(peer)
    ratio = preflight_s / peer_s
    print(f"preflight: {rows} rows in {preflight_s:.2f} s = {rows / preflight_s:,.0f} rows/s "
          f"(tokenizer load and model config included)")
    print(f"peer, the chat template alone over the {len(conversations)} usable conversations: {peer_s:.2f} s = "
          f"{len(conversations) / peer_s:,.0f} rows/s")
    print(f"ratio preflight / peer: {ratio:.2f} (goal <= {GOAL})")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
