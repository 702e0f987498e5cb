"""Fixtures for the generate tests: a tiny real tokenizer and prompt files (the simulator: tests/conftest.py)."""

import json

import pytest

from draftgen_dev.tiny_model import build_tiny_tokenizer


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
