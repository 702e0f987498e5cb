"""Fixtures for the generate tests: a tiny real tokenizer, prompt files, an in-process simulator."""

import json

import pytest

from draftgen_dev.tiny_model import build_tiny_tokenizer
from jobrunner.simulator import SimConfig, Simulator


@pytest.fixture(scope="session")
def tokenizer_path(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tokenizer"))


def write_prompts(path, n: int, start: int = 0) -> str:
    with open(path, "w") as f:
        for i in range(start, start + n):
            f.write(json.dumps({"messages": [{"role": "user", "content": f"question {i}: what is {i} + {i}?"}]}) + "\n")
    return str(path)


@pytest.fixture
def prompts_file(tmp_path):
    return write_prompts(tmp_path / "prompts.jsonl", 200)


@pytest.fixture
async def make_sim():
    started = []

    async def start(**kwargs) -> Simulator:
        kwargs.setdefault("speedup", 200.0)
        kwargs.setdefault("profile", "chat")
        sim = Simulator(SimConfig(**kwargs))
        await sim.start()
        started.append(sim)
        return sim

    yield start
    for sim in started:
        await sim.stop()
