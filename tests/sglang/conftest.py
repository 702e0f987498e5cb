"""Fixtures for the SGLang simulator and client tests: simulators started in-process on free
127.0.0.1 ports and always stopped."""

from __future__ import annotations

import pytest

from jobrunner.simulator import FaultRates, SimConfig, Simulator


@pytest.fixture
async def start_sim():
    """`await start_sim(**SimConfig fields)` -> (simulator, base_url); `faults=` takes a dict."""
    started: list[Simulator] = []

    async def _start(**kwargs):
        faults = kwargs.pop("faults", None)
        config = SimConfig(**kwargs, faults=FaultRates(**(faults or {})))
        sim = Simulator(config)
        url = await sim.start()
        started.append(sim)
        return sim, url

    yield _start
    for sim in started:
        await sim.stop()
