"""Fixtures of the local runner's tests: the tiny model (built once), prompts, and quickstart-like specs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from draftgen_dev.builders import SpecBuilder
from draftgen_dev.demo_assets import build_model, write_datasets


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    """What the pods see at spec.model.mountPath: the tiny model under `tiny/`, as the quickstart says."""
    models = tmp_path_factory.mktemp("models")
    build_model(models / "tiny")
    return models


@pytest.fixture
def data_dir(tmp_path) -> Path:
    """What the pods see as /data: the quickstart's prompt files under `prompts/`."""
    data = tmp_path / "data"
    write_datasets(data / "prompts", rows_per_dataset=60)
    return data


def quickstart(budget_tokens: int = 1000, server_args: list[str] | None = None, extraction: bool = True,
               **spec_updates) -> dict:
    """examples/quickstart.yaml with small budgets (a test takes seconds) and a faster simulator."""
    return (SpecBuilder.quickstart().budgets(budget_tokens)
            .server_args(*(server_args if server_args is not None else ["--speedup", "20"]))
            .extraction(extraction).set(**spec_updates).obj())


def write_spec(path: Path, obj: dict) -> Path:
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return path
