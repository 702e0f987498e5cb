"""The examples a user starts from pass `draftgen run`'s admission and the preflight on a model built
like their target (draftgen_dev.kimi_like: custom tokenizer code, so only with trustRemoteCode), with
their files laid out as the examples' comments say they are downloaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from draftgen import plan
from draftgen.local.paths import local_path, pod_mounts
from draftgen.local.spec_file import load_spec
from draftgen_contracts.generate_config import CoordinationConfig
from draftgen_dev.demo_assets import write_datasets
from draftgen_dev.kimi_like import build_kimi_like
from jobrunner.preflight.run import run_preflight
from tests.jobrunner.inputs_as_they_come import glaive, openai_batch, shard_set

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_example_passes_admission(example):
    name, spec = load_spec(EXAMPLES / example)
    assert name and spec.datasets


def local_config(name: str, spec, data: Path, models: Path, inputs: Path | None = None):
    """The spec's generate config with the pods' paths moved to these folders (as draftgen run does)."""
    config = plan.generate_config(spec, server_url="http://127.0.0.1:1", output_root=f"/data/{name}", run_id=name,
                                  coordination=CoordinationConfig(), progress_interval_s=5)
    return config.with_paths(lambda p: local_path(p, pod_mounts(spec, data, models, inputs)))


def lay_out_hf_example(data: Path) -> None:
    """The files examples/hf-datasets.yaml names, as they come, in its inputs volume's folder."""
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
    models, data, library = tmp_path / "models", tmp_path / "data", tmp_path / "library"
    build_kimi_like(models / spec.model.path)
    lay_out_hf_example(library)

    def config_of(trusted):
        return local_config(name, spec.model_copy(update={"model": spec.model.model_copy(
            update={"trust_remote_code": trusted})}), data, models, library)

    findings = run_preflight(config_of(True), str(models / spec.model.path))
    assert findings.problem is None, findings.problem
    found = {d.name: d for d in findings.datasets}
    assert found["math"].usable_rows == 12 and found["glaive"].skipped_by_reason == {"unconvertible": 1}
    assert found["support"].skipped_by_reason == {"unsupported_request": 1} and found["trivia"].usable_rows == 10
    refused = run_preflight(config_of(False), str(models / spec.model.path)).problem
    assert refused is not None and "spec.model.trustRemoteCode" in refused.message


def lay_out_kimi_example(data: Path, model: Path) -> None:
    """The ten prompt files examples/kimi-k25-eagle3.yaml names: chat, tool-call and ShareGPT rows, and
    the two pretokenized trace sets as Kimi-like token ids ending with the turn's end token."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from draftgen_dev.kimi_like import TURN_END
    from jobrunner.shared.datasets import Conversation
    from jobrunner.shared.prompts import load_tokenizer, render_conversation

    made = write_datasets(data / "made", rows_per_dataset=30)
    prompts = data / "prompts"
    prompts.mkdir()
    for name in ("code", "math", "reasoning", "writing", "swe_traces"):
        shutil.copyfile(made["chat"], prompts / f"{name}.jsonl")
    shutil.copyfile(made["tools"], prompts / "function_calling.jsonl")
    for name in ("chat", "multilingual"):
        shutil.copyfile(made["sharegpt"], prompts / f"{name}.parquet")
    tokenizer = load_tokenizer(model, trust_remote_code=True)
    end = tokenizer.convert_tokens_to_ids(TURN_END)
    rows = [{"prompt_ids": render_conversation(tokenizer, Conversation(i, [{"role": "user", "content": f"Name {i}."}]),
                                               {"thinking": False}),
             "output_ids": tokenizer.encode(f"It is {i}.", add_special_tokens=False) + [end]} for i in range(20)]
    for name in ("pretok_a", "pretok_b"):
        pq.write_table(pa.Table.from_pylist(rows), prompts / f"{name}.parquet")


def test_the_kimi_example_passes_the_preflight_on_a_model_built_like_its_target(tmp_path):
    name, spec = load_spec(EXAMPLES / "kimi-k25-eagle3.yaml")
    models, data = tmp_path / "models", tmp_path / "data"
    build_kimi_like(models / spec.model.path)
    lay_out_kimi_example(data, models / spec.model.path)
    findings = run_preflight(local_config(name, spec, data, models), str(models / spec.model.path))
    assert findings.problem is None, findings.problem
    assert {d.name for d in findings.datasets} == {d.name for d in spec.datasets}
    assert all(d.usable_rows > 0 for d in findings.datasets)
