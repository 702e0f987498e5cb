"""The SGLang simulator in its own process, with its statistics sampled over time.

Benchmarks and soak tests run the simulator in a separate process so it shares neither the
client's event loop nor its CPU accounting. The child samples `(time.monotonic(), stats)` every
`sample_s`; CLOCK_MONOTONIC is system-wide on Linux, so the parent can line the samples up with
its own timestamps (e.g. the moment a budget was crossed).
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import threading
import time


def _child(config_kwargs: dict, sample_s: float, conn) -> None:
    from draftgen_simulator.config import FaultRates, SimConfig
    from draftgen_simulator.server import run_in_thread

    if "faults" in config_kwargs:
        config_kwargs["faults"] = FaultRates(**config_kwargs["faults"])
    url, handle = run_in_thread(SimConfig(**config_kwargs))
    samples: list[tuple[float, dict]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.monotonic(), dataclasses.asdict(handle.stats)))
            stop.wait(sample_s)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    conn.send(url)
    while True:
        command = conn.recv()
        if command == "stats":
            conn.send(dataclasses.asdict(handle.stats))
        elif command == "samples":
            conn.send(list(samples))
        elif command == "stop":
            stop.set()
            sampler.join()
            handle.stop()
            conn.send("stopped")
            return


class SimulatorProcess:
    def __init__(self, sample_s: float = 0.005, **config_kwargs):
        ctx = mp.get_context("spawn")
        self._conn, child_conn = ctx.Pipe()
        self._proc = ctx.Process(target=_child, args=(config_kwargs, sample_s, child_conn), daemon=True)
        self._proc.start()
        self.base_url: str = self._conn.recv()

    def stats(self) -> dict:
        self._conn.send("stats")
        return self._conn.recv()

    def samples(self) -> list[tuple[float, dict]]:
        self._conn.send("samples")
        return self._conn.recv()

    def stop(self) -> None:
        if self._proc.is_alive():
            self._conn.send("stop")
            self._conn.recv()
            self._proc.join(timeout=10)
        if self._proc.is_alive():
            self._proc.kill()

    def __enter__(self) -> SimulatorProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
