"""The real SGLang on the CPU with torch's default threads against one OpenMP thread per process.

    .venv/bin/python bench/real_sglang_threads.py [--requests 16] [--tokens 100]

For one server and for two side by side (two replicas on one two-core machine, as the real tier
and `make demo` run them), each thread setting: start the servers on the tiny model,
send every server `--requests` concurrent requests of `--tokens` tokens (ignore_eos), and print the
output tokens/s and the ratio of one thread to the default. Nothing else may run meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import httpx

from draftgen_dev.demo_assets import build_model
from draftgen_dev.real_sglang.server import RealSGLang


async def load(url: str, requests: int, tokens: int) -> int:
    body = {"input_ids": list(range(10, 60)), "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True}}
    async with httpx.AsyncClient(base_url=url, timeout=1800) as c:
        answers = await asyncio.gather(*(c.post("/generate", json=body) for _ in range(requests)))
    return sum(a.json()["meta_info"]["completion_tokens"] for a in answers)


def tokens_per_second(model: Path, logs: Path, servers: int, threads: str | None, requests: int, tokens: int) -> float:
    started = [RealSGLang(model, logs / f"{servers}-{threads}-{i}.log", "--max-running-requests", str(requests))
               for i in range(servers)]
    try:
        for server in started:  # None: torch's default, one thread per core
            server.start(env_overrides={"OMP_NUM_THREADS": threads})
        t0 = time.monotonic()

        async def all_servers():
            return await asyncio.gather(*(load(s.base_url, requests, tokens) for s in started))
        made = sum(asyncio.run(all_servers()))
        return made / (time.monotonic() - t0)
    finally:
        for server in started:
            server.stop()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=100)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="real-sglang-threads-"))
    model = build_model(work / "model")
    for servers in (1, 2):
        default = tokens_per_second(model, work, servers, None, args.requests, args.tokens)
        one = tokens_per_second(model, work, servers, "1", args.requests, args.tokens)
        print(f"{servers} server(s), {args.requests} x {args.tokens} tokens each: default threads {default:,.0f} tok/s, "
              f"OMP_NUM_THREADS=1 {one:,.0f} tok/s, ratio {one / default:.1f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
