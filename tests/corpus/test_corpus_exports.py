"""Exports: Parquet for `datasets`, the speculators JSONL, and the SpecForge / speculators state layouts."""

from __future__ import annotations

import json

import pytest
import torch

from draftgen_dev.tiny_model import build_tiny_llama
from jobrunner import corpus, exports, merge
from jobrunner.extract import extract
from jobrunner.hidden_states.store import load_sample
from tests.corpus.conftest import synthetic_generation


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen")
    synthetic_generation(root, rows=12)
    merge.merge(root, root / "corpus", merge.MergeSettings(eval_fraction=0.3, shard_records=10), log=lambda *_: None)
    return root / "corpus"


def test_parquet_holds_the_corpus(corpus_dir):
    import pyarrow.parquet as pq

    out = exports.export_corpus(corpus_dir, "hf-parquet")
    for split in corpus.SPLITS:
        rows = [r for p in sorted(out.glob(f"{split}-*.parquet")) for r in pq.read_table(p).to_pylist()]
        assert rows == list(corpus.iter_corpus(corpus_dir, split))


def test_speculators_jsonl(corpus_dir):
    out = exports.export_corpus(corpus_dir, "speculators-jsonl")
    rows = [json.loads(line) for line in open(out / "train.jsonl")]
    want = list(corpus.iter_corpus(corpus_dir, "train"))
    assert [(r["input_ids"], r["loss_mask"]) for r in rows] == [(r["input_ids"], r["loss_mask"]) for r in want]


@pytest.mark.parametrize("kind, final_state", [("specforge", "post-norm"), ("speculators", "pre-norm")])
def test_state_exports(corpus_dir, tmp_path, kind, final_state):
    model = build_tiny_llama(tmp_path / "m", vocab_size=1024)
    out = tmp_path / "states"
    index = extract(corpus_dir, out, model, splits=["train"], dtype="fp32", final_state=final_state, log=lambda *_: None)
    other = "speculators" if kind == "specforge" else "specforge"
    with pytest.raises(ValueError, match="final state"):
        exports.export_states(out, other)
    exp = exports.export_states(out, kind)
    ids = json.loads((exp / "sample_ids.json").read_text())
    assert ids == sorted(index["samples"])
    for i, sid in enumerate(ids):
        s = load_sample(out, sid, index)
        if kind == "specforge":
            d = torch.load(exp / "rows_0-1000" / f"data_{i}.ckpt")
            assert torch.equal(d["input_ids"], s["input_ids"]) and d["loss_mask"].tolist() == s["loss_mask"].tolist()
            assert torch.equal(d["hidden_state"][0], s["final_hidden_state"])
            assert torch.equal(d["aux_hidden_state"][0].reshape(-1, 3, 64), s["aux_hidden_states"])
        else:
            from safetensors.torch import load_file

            d = load_file(exp / "hidden_states" / f"hs_{i}.safetensors")
            assert torch.equal(d["token_ids"], s["input_ids"])
            assert torch.equal(d["hidden_states"][:, :3], s["aux_hidden_states"])
            assert torch.equal(d["hidden_states"][:, 3], s["final_hidden_state"])
    if kind == "speculators":
        rows = [json.loads(line) for line in open(exp / "data.jsonl")]
        assert [r["seq_len"] for r in rows] == [index["samples"][sid]["length"] for sid in ids]
