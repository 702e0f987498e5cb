"""The SGLang client (aiohttp) against an httpx peer, at concurrency 150, in the same run.

Both drive the same simulator (its own process, capacity C tokens/s, responses of a fixed length)
with the same loop: a semaphore of 150 over N `/generate` requests with `input_ids`. Printed per
client: server utilisation (tokens generated / (C x wall time)) and the client's CPU milliseconds per
request; then the ratio of httpx's CPU to ours. This is why `jobrunner.sglang.client` uses aiohttp
although httpx is the usual choice (httpx's pool is known to cost CPU per request at high
concurrency: encode/httpx#3215).

    .venv/bin/python bench/client_peer.py [--requests 1500] [--capacity-tps 30000]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time

import httpx

from draftgen_dev.sim_process import SimulatorProcess
from jobrunner.sglang.client import SGLangClient

CONCURRENCY = 150
LENGTH = 200
PROMPT = list(range(10, 60))


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def drive(send, requests: int) -> None:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int):
        async with gate:
            await send(i)

    await asyncio.gather(*(one(i) for i in range(requests)))


async def with_ours(url: str, requests: int) -> None:
    async with SGLangClient(url, max_connections=CONCURRENCY + 8) as client:
        await drive(lambda i: client.generate(PROMPT, {"max_new_tokens": LENGTH}, rid=f"ours-{i:08d}"), requests)


async def with_httpx(url: str, requests: int) -> None:
    limits = httpx.Limits(max_connections=CONCURRENCY + 8, max_keepalive_connections=CONCURRENCY + 8)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=600) as client:
        async def send(i: int):
            r = await client.post("/generate", json={"input_ids": PROMPT, "rid": f"peer-{i:08d}",
                                                     "sampling_params": {"max_new_tokens": LENGTH}})
            r.raise_for_status()
        await drive(send, requests)


def measure(name: str, run, capacity: float, requests: int) -> float:
    with SimulatorProcess(capacity_tps=capacity, per_request_tps=1.05 * capacity / CONCURRENCY,
                          profile=f"fixed:{LENGTH}", max_running_requests=CONCURRENCY + 8) as sim:
        cpu0, t0 = cpu_seconds(), time.monotonic()
        asyncio.run(run(sim.base_url, requests))
        wall, cpu = time.monotonic() - t0, cpu_seconds() - cpu0
        generated = sim.stats()["tokens_generated_total"]
    per_request_ms = 1000 * cpu / requests
    print(f"{name:22s} utilisation {generated / (capacity * wall):.3f}   client CPU {per_request_ms:.2f} ms/request "
          f"({cpu:.2f} s for {requests} requests in {wall:.1f} s)", flush=True)
    return per_request_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--capacity-tps", type=float, default=30000)
    args = parser.parse_args()
    ours = measure("jobrunner (aiohttp)", with_ours, args.capacity_tps, args.requests)
    peer = measure("httpx peer", with_httpx, args.capacity_tps, args.requests)
    print(f"httpx CPU per request / ours: {peer / ours:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
