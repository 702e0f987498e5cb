"""The differential contract test: every probe (tests/real_sglang/probes.py) sent to the real
SGLang 0.5.23 and to the simulator configured as that server was launched, and what each observed
compared field by field. What still differs is listed here, each with its reason in
docs/sglang.md#where-the-simulator-differs, and asserted exactly: a difference that appears, or one
that goes away, fails the test until the list and the docs say so."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.real_sglang.probes import PROBES

# probe -> {field: (real, simulator)}
KNOWN_DIFFERENCES: dict[str, dict[str, tuple[Any, Any]]] = {
    "stop_string": {"finish.type": ("stop", "length"), "finish.matched": ("the stop string", None),
                    "finish.length": (None, 30), "output_len": ("shorter", 30)},
}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "sglang.md"


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out = {}
        for key, inner in value.items():
            out.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for i, inner in enumerate(value):
            out.update(flatten(inner, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def differences(real: Any, simulated: Any) -> dict[str, tuple[Any, Any]]:
    a, b = flatten(real), flatten(simulated)
    return {k: (a.get(k), b.get(k)) for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)}


def observe(base_url: str, name: str) -> dict[str, Any]:
    async def run():
        async with httpx.AsyncClient(base_url=base_url, timeout=120) as c:
            return await PROBES[name](c)
    return asyncio.run(run())


@pytest.mark.parametrize("name", list(PROBES))
def test_the_simulator_answers_this_probe_as_the_real_server_does(name, real_sglang, simulated_sglang):
    real = observe(real_sglang.base_url, name)
    simulated = observe(simulated_sglang.base_url, name)
    assert differences(real, simulated) == KNOWN_DIFFERENCES.get(name, {}), (real, simulated)


def test_every_remaining_difference_is_explained_in_the_docs():
    section = DOCS.read_text().split("## Where the simulator differs", 1)[1].split("\n## ", 1)[0]
    assert set(KNOWN_DIFFERENCES) <= set(PROBES)
    for name in KNOWN_DIFFERENCES:
        assert f"`{name}`" in section, f"docs/sglang.md does not explain the {name} difference"
