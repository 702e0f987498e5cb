"""`jobrunner validate` over a real corpus and its states from a tiny real model, and each corruption
it must catch: ids, lengths, a loss mask over a prompt token, NaN, a sample twice or missing."""

from __future__ import annotations

import json
import shutil

import pytest

from draftgen_contracts import exit_codes
from draftgen_dev.tiny_model import build_tiny_llama
from jobrunner.merge.run import merge_corpus
from jobrunner.merge.settings import MergeSettings
from jobrunner.cli import main as cli_main
from jobrunner.hidden_states.extract import extract
from jobrunner.hidden_states.extraction_settings import ExtractionSettings
from jobrunner.validate.checks import mask_problem, once_problems
from tests.corpus.conftest import synthetic_generation

QUIET = dict(log=lambda *_: None)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen")
    synthetic_generation(root, rows=20)
    merge_corpus(root, root / "corpus", MergeSettings(eval_fraction=0.2, shard_records=10), **QUIET)
    model = build_tiny_llama(root / "model", vocab_size=1024)
    extract(root / "corpus", root / "states", model,
            ExtractionSettings(splits=("train", "eval"), dtype="bf16", shard_mb=0.01, max_batch_size=4), **QUIET)
    return root


@pytest.fixture
def copy(made, tmp_path):
    """A copy of the corpus and states to corrupt."""
    for name in ("corpus", "states"):
        shutil.copytree(made / name, tmp_path / name)
    return tmp_path


def validate(root, capsys) -> tuple[int, str]:
    code = cli_main(["validate", "--corpus", str(root / "corpus"), "--states", str(root / "states")])
    return code, capsys.readouterr().out


def rewrite_shard(path, change) -> None:
    """The shard at `path` with `change(tensors)` applied, its metadata kept."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(path), "pt") as f:
        tensors, meta = {k: f.get_tensor(k) for k in f.keys()}, f.metadata()
    change(tensors)
    save_file(tensors, str(path), metadata=meta)


def first_shard(root):
    return sorted((root / "states").glob("shard-*.safetensors"))[0]


def rewrite_corpus_line(root, change) -> str:
    """The first corpus sample with `change(record)` applied; returns its sample id."""
    shard = sorted((root / "corpus").glob("train-*.jsonl"))[0]
    lines = shard.read_text().splitlines()
    record = json.loads(lines[0])
    change(record)
    lines[0] = json.dumps(record, separators=(",", ":"))
    shard.write_text("\n".join(lines) + "\n")
    return record["sample_id"]


def test_a_sound_corpus_and_states_pass(made, capsys):
    code, out = validate(made, capsys)
    assert code == exit_codes.OK, out
    assert "states: every sample once" in out and "validate: no problem found" in out


def test_a_token_id_changed_in_the_states_is_named(copy, capsys):
    rewrite_shard(first_shard(copy), lambda t: t["input_ids"].__setitem__(0, t["input_ids"][0] + 1))
    code, out = validate(copy, capsys)
    assert code == exit_codes.FAILED and "token id" in out and "at position 0" in out


def test_a_length_that_disagrees_with_the_corpus_is_named(copy, capsys):
    sid = rewrite_corpus_line(copy, lambda r: (r["input_ids"].append(5), r["loss_mask"].append(1)))
    code, out = validate(copy, capsys)
    assert code == exit_codes.FAILED and "sha256 differs" in out
    assert f"{sid}: " in out and "tokens stored, the corpus sample has" in out


def test_a_loss_mask_over_a_prompt_token_is_named(copy, capsys):
    sid = rewrite_corpus_line(copy, lambda r: r["loss_mask"].__setitem__(0, 1))
    code, out = validate(copy, capsys)
    assert code == exit_codes.FAILED and f"{sid}: loss mask 1 at position 0: it must be 0 on the" in out


def test_nan_and_inf_in_the_states_are_found(copy, capsys):
    def poison(t):
        t["aux_hidden_states"][2, 1, 3] = float("nan")
        t["final_hidden_state"][4, 0] = float("inf")
    rewrite_shard(first_shard(copy), poison)
    code, out = validate(copy, capsys)
    assert code == exit_codes.FAILED and "non-finite values in aux_hidden_states" in out


def test_a_sample_stored_twice_or_lost_is_found(copy, capsys):
    shards = sorted((copy / "states").glob("shard-*.safetensors"))
    shutil.copy(shards[0], copy / "states" / "shard-000999.safetensors")
    code, out = validate(copy, capsys)
    assert code == exit_codes.FAILED and "in 2 shards" in out
    (copy / "states" / "shard-000999.safetensors").unlink()
    shards[1].unlink()
    code, out = validate(copy, capsys)
    assert code == exit_codes.FAILED and "in index.json but in no shard" in out
    assert "corpus samples not stored, but index.json counts 0 skipped" in out


def test_mask_problem_and_once_problems_as_pure_decisions():
    ok = {"input_ids": [1, 2, 3, 4], "loss_mask": [0, 0, 1, 1], "prompt_len": 2}
    assert mask_problem(ok) is None
    assert "at position 3" in mask_problem({**ok, "loss_mask": [0, 0, 1, 0]})
    assert mask_problem({**ok, "loss_mask": [0, 1]}) == "4 ids but a loss mask of 2"
    index = {"samples": {"a": {}, "b": {}}, "skipped": {"too_long": 1}}
    assert once_problems({"s0": ["a"], "s1": ["b"]}, index, {"a", "b", "c"}) == []
    assert once_problems({"s0": ["a", "b"], "s1": ["b"]}, index, {"a", "b", "c"}) == ["b: in 2 shards"]
