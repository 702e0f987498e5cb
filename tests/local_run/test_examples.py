"""The examples a user starts from pass `draftgen run`'s admission, and the datasets-as-they-come
example passes the preflight on a model built like its target (draftgen_dev.kimi_like: custom tokenizer
code, so only with its trustRemoteCode) with data laid out as its comments say it is downloaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from draftgen import plan
from draftgen.local.spec_file import load_spec
from draftgen_contracts.generate_config import CoordinationConfig
from draftgen_dev.kimi_like import build_kimi_like
from jobrunner.preflight.run import run_preflight
from tests.jobrunner.inputs_as_they_come import glaive, openai_batch, shard_set

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_example_passes_admission(example):
    name, spec = load_spec(EXAMPLES / example)
    assert name and spec.datasets


def lay_out_hf_example(data: Path) -> None:
    """The files examples/hf-datasets.yaml names, as they come."""
    shard_set(data / "math-shards", rows_per_file=6)
    (data / "hf/numina-math/data").mkdir(parents=True)
    for shard in sorted((data / "math-shards").glob("*.parquet")):  # the Parquet shard is the glob's
        shard.rename(data / "hf/numina-math/data" / shard.name)
    (data / "hf/numina-math/data/train-00001-of-00003.parquet").write_bytes(
        (data / "hf/numina-math/data/train-00000-of-00003.parquet").read_bytes())
    (data / "hf/glaive-function-calling-v2").mkdir(parents=True)
    glaive(data / "hf/glaive-function-calling-v2/glaive-function-calling-v2.json")
    (data / "batches").mkdir()
    openai_batch(data / "batches/support-requests.jsonl")
    (data / "hf/trivia/data").mkdir(parents=True)
    rows = [{"qid": f"t{i}", "question": f"Which planet is number {i % 8 + 1} from the sun?",
             "instructions": "Answer in one word."} for i in range(10)]
    (data / "hf/trivia/data/train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_hf_datasets_example_passes_the_preflight_only_with_trust(tmp_path):
    name, spec = load_spec(EXAMPLES / "hf-datasets.yaml")
    models, data = tmp_path / "models", tmp_path / "data"
    build_kimi_like(models / spec.model.path)
    lay_out_hf_example(data)

    def config_of(trusted):
        s = spec.model_copy(update={"model": spec.model.model_copy(update={"trust_remote_code": trusted})})
        config = plan.generate_config(s, server_url="http://127.0.0.1:1", output_root=str(data / name), run_id=name,
                                      coordination=CoordinationConfig(), progress_interval_s=5)
        local = {"/data": str(data), spec.model.mount_path: str(models)}
        return config.with_paths(lambda p: next((p.replace(k, v, 1) for k, v in local.items() if p.startswith(k)), p))

    findings = run_preflight(config_of(True), str(models / spec.model.path))
    assert findings.problem is None, findings.problem
    found = {d.name: d for d in findings.datasets}
    assert found["math"].usable_rows == 12 and found["glaive"].skipped_by_reason == {"unconvertible": 1}
    assert found["support"].skipped_by_reason == {"unsupported_request": 1} and found["trivia"].usable_rows == 10
    refused = run_preflight(config_of(False), str(models / spec.model.path)).problem
    assert refused is not None and "spec.model.trustRemoteCode" in refused.message
