"""Exports: Parquet for `datasets`, the speculators JSONL, and the SpecForge / speculators state layouts."""

from __future__ import annotations

import json

import pytest
import torch

from draftgen_contracts.hidden_state_layout import export_bytes
from draftgen_dev.tiny_model import build_tiny_llama
from jobrunner.hidden_states.exports import corpus_facts, export_states
from jobrunner.merge.exports import export_corpus
from jobrunner.shared import corpus
from jobrunner.hidden_states.extract import extract
from jobrunner.hidden_states.extraction_settings import ExtractionSettings
from jobrunner.hidden_states.store import load_sample
from tests.corpus.conftest import merged_corpus


def extracted(corpus_dir, out, model, **settings) -> dict:
    """The states of the corpus's train split (unless `settings` say other splits), quietly."""
    return extract(corpus_dir, out, model, ExtractionSettings(**{"splits": ("train",), **settings}),
                   log=lambda *_: None)


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    return merged_corpus(tmp_path_factory.mktemp("gen"), rows=12, eval_fraction=0.3, shard_records=10)


def test_parquet_holds_the_corpus(corpus_dir):
    import pyarrow.parquet as pq

    out = export_corpus(corpus_dir, "hf-parquet")
    for split in corpus.SPLITS:
        rows = [r for p in sorted(out.glob(f"{split}-*.parquet")) for r in pq.read_table(p).to_pylist()]
        # source_id is null where a row had no id of its own (the corpus record then has no key)
        assert rows == [{**r, "source_id": r.get("source_id")} for r in corpus.iter_corpus(corpus_dir, split)]


def test_speculators_jsonl(corpus_dir):
    out = export_corpus(corpus_dir, "speculators-jsonl")
    rows = [json.loads(line) for line in open(out / "train.jsonl")]
    want = list(corpus.iter_corpus(corpus_dir, "train"))
    assert [(r["input_ids"], r["loss_mask"]) for r in rows] == [(r["input_ids"], r["loss_mask"]) for r in want]
    # What the corpus knows of each response stays, to filter by: cut at the budget, truncated.
    assert [(r["sample_id"], r["truncated"], r["cut_at_budget"]) for r in rows] == [
        (r["sample_id"], r["truncated"], r["cut_at_budget"]) for r in want]
    assert any(r["cut_at_budget"] for r in rows)


@pytest.mark.parametrize("kind, final_state", [("specforge", "post-norm"), ("speculators", "pre-norm")])
def test_state_exports(corpus_dir, tmp_path, kind, final_state):
    model = build_tiny_llama(tmp_path / "m", vocab_size=1024)
    out = tmp_path / "states"
    index = extracted(corpus_dir, out, model, dtype="fp32", final_state=final_state)
    other = "speculators" if kind == "specforge" else "specforge"
    with pytest.raises(ValueError, match="final state"):
        export_states(out, other, corpus_dir)
    exp = export_states(out, kind, corpus_dir)[0] / "train"
    ids = json.loads((exp / "sample_ids.json").read_text())
    assert ids == sorted(index["samples"])
    facts = corpus_facts(corpus_dir)
    for i, sid in enumerate(ids):
        s = load_sample(out, sid, index)
        if kind == "specforge":
            d = torch.load(exp / "rows_00000000-00001000" / f"data_{i:08d}.ckpt")
            assert torch.equal(d["input_ids"], s["input_ids"]) and d["loss_mask"].tolist() == s["loss_mask"].tolist()
            assert torch.equal(d["hidden_state"][0], s["final_hidden_state"])
            assert torch.equal(d["aux_hidden_state"][0].reshape(-1, 3, 64), s["aux_hidden_states"])
            assert (bool(d["truncated"]), bool(d["cut_at_budget"])) == facts[sid][1:]
        else:
            from safetensors.torch import load_file

            d = load_file(exp / "hidden_states" / f"hs_{i}.safetensors")
            assert torch.equal(d["token_ids"], s["input_ids"])
            assert torch.equal(d["hidden_states"][:, :3], s["aux_hidden_states"])
            assert torch.equal(d["hidden_states"][:, 3], s["final_hidden_state"])
    # What it wrote, against what the estimate counts for it (one file a sample, no shard's whole
    # storage in each).
    written = sum(p.stat().st_size for p in exp.rglob("*") if p.is_file())
    tokens = sum(index["samples"][sid]["length"] for sid in ids)
    expected = export_bytes(kind, tokens, len(ids), 64, 3, "fp32")
    assert abs(written / expected - 1) <= 0.10, (written, expected)
    if kind == "speculators":
        import pyarrow as pa

        rows = pa.ipc.open_stream(pa.memory_map(str(exp / "data-00000-of-00001.arrow"))).read_all().to_pylist()
        assert [r["sample_id"] for r in rows] == ids
        assert [r["seq_len"] for r in rows] == [index["samples"][sid]["length"] for sid in ids]
        assert [(r["truncated"], r["cut_at_budget"]) for r in rows] == [facts[sid][1:] for sid in ids]


def test_fp8_states_export_as_fp8_for_speculators_and_bf16_for_specforge(corpus_dir, tmp_path):
    from safetensors.torch import load_file

    model = build_tiny_llama(tmp_path / "m", vocab_size=1024)
    for final_state, kind in (("pre-norm", "speculators"), ("post-norm", "specforge")):
        out = tmp_path / kind
        index = extracted(corpus_dir, out, model, dtype="fp8", final_state=final_state)
        exp = export_states(out, kind, corpus_dir)[0] / "train"
        sid = sorted(index["samples"])[0]
        s = load_sample(out, sid, index)
        if kind == "speculators":
            d = load_file(exp / "hidden_states" / "hs_0.safetensors")
            assert d["hidden_states"].dtype == torch.float8_e4m3fn and d["hidden_states_scales"].shape[1:] == (4, 1)
            restored = d["hidden_states"].float() * d["hidden_states_scales"]
            assert torch.equal(restored[:, :3].bfloat16(), s["aux_hidden_states"])
        else:
            d = torch.load(exp / "rows_00000000-00001000" / "data_00000000.ckpt")
            assert d["hidden_state"].dtype == torch.bfloat16 and torch.equal(d["hidden_state"][0], s["final_hidden_state"])


def test_state_exports_keep_the_splits_apart_and_say_what_each_holds(corpus_dir, tmp_path):
    """States of both splits: the trainer's folder (train/) holds no eval sample; the manifest counts
    each split's samples, truncated and cut at the budget."""
    model = build_tiny_llama(tmp_path / "m", vocab_size=1024)
    out = tmp_path / "states"
    index = extracted(corpus_dir, out, model, splits=tuple(corpus.SPLITS), dtype="fp32", final_state="post-norm")
    exp, = export_states(out, "specforge", corpus_dir)
    manifest = json.loads((exp / "manifest.json").read_text())
    by_split = {split: json.loads((exp / split / "sample_ids.json").read_text()) for split in corpus.SPLITS}
    for split, ids in by_split.items():
        rows = list(corpus.iter_corpus(corpus_dir, split))
        assert ids == sorted(r["sample_id"] for r in rows) and ids
        assert manifest["splits"][split] == {"folder": split, "samples": len(ids),
                                             "sample_ids": f"{split}/sample_ids.json",
                                             "truncated": sum(r["truncated"] for r in rows),
                                             "cut_at_budget": sum(r["cut_at_budget"] for r in rows)}
        assert len(list((exp / split).rglob("data_*.ckpt"))) == len(ids)
    assert sorted(by_split["train"] + by_split["eval"]) == sorted(index["samples"])
    assert sum(m["cut_at_budget"] for m in manifest["splits"].values()) > 0


def test_one_forward_serves_eagle3_dflash_and_mtp_and_each_export_picks_its_layers(corpus_dir, tmp_path):
    """The tiny model has 8 layers: EAGLE-3 reads [1, 3, 4], DFlash [1, 2, 3, 4, 5], so one forward
    stores five layers; each export holds exactly its drafter's, from the same stored tensors."""
    from safetensors.torch import load_file

    model = build_tiny_llama(tmp_path / "m", vocab_size=1024)
    out = tmp_path / "states"
    index = extracted(corpus_dir, out, model, dtype="fp32", final_state="pre-norm",
                      drafters=("eagle3", "dflash", "mtp"))
    assert index["run"]["aux_layers"] == [1, 2, 3, 4, 5]
    assert index["run"]["drafters"] == {"eagle3": [1, 3, 4], "dflash": [1, 2, 3, 4, 5], "mtp": []}
    assert json.loads((out / "estimate.json").read_text())["aux_count"] == 5  # the bytes follow the layers
    folders = export_states(out, "speculators", corpus_dir)
    assert [f.name for f in folders] == ["speculators", "speculators-dflash", "speculators-mtp"]
    with pytest.raises(ValueError, match="post-norm"):  # SpecForge's EAGLE-3 reads the post-norm state
        export_states(out, "specforge", corpus_dir)
    sid = sorted(index["samples"])[0]
    s = load_sample(out, sid, index)
    aux, final = s["aux_hidden_states"], s["final_hidden_state"]
    for folder, want in zip(folders, (aux[:, [0, 2, 3]], aux, final.unsqueeze(1))):
        d = load_file(folder / "train" / "hidden_states" / "hs_0.safetensors")
        assert torch.equal(d["hidden_states"], torch.cat([want, final.unsqueeze(1)], dim=1)), folder.name
        assert json.loads((folder / "manifest.json").read_text())["drafter"] in folder.name + "-eagle3"


def test_specforges_dflash_layout_takes_states_of_either_final_state(corpus_dir, tmp_path):
    model = build_tiny_llama(tmp_path / "m", vocab_size=1024)
    out = tmp_path / "states"
    index = extracted(corpus_dir, out, model, dtype="fp32", final_state="pre-norm", drafters=("dflash",))
    folder, = export_states(out, "specforge", corpus_dir)
    assert folder.name == "specforge-dflash"
    d = torch.load(folder / "train" / "rows_00000000-00001000" / "data_00000000.ckpt")
    s = load_sample(out, sorted(index["samples"])[0], index)
    assert set(d) == {"input_ids", "loss_mask", "hidden_states", "truncated", "cut_at_budget"}
    assert torch.equal(d["hidden_states"][0], s["aux_hidden_states"].flatten(1))
    with pytest.raises(ValueError, match="final state alone"):  # both backends capture some layer besides
        extracted(corpus_dir, tmp_path / "mtp", model, drafters=("mtp",))
    extracted(corpus_dir, tmp_path / "mtp", model, drafters=("mtp",), aux_layers=(5,), final_state="pre-norm")
    with pytest.raises(ValueError, match="specforge trains none of the drafters these states serve"):
        export_states(tmp_path / "mtp", "specforge", corpus_dir)


def test_fp8_states_keep_their_scales_in_speculators_dflash_and_mtp_layouts(corpus_dir, tmp_path):
    """Each drafter's layout picks its layers' scales with its layers: dequantized, every layout gives the
    stored states back (MTP's one input layer is the final state, its scale repeated)."""
    from safetensors.torch import load_file

    model = build_tiny_llama(tmp_path / "m", vocab_size=1024)
    out = tmp_path / "states"
    index = extracted(corpus_dir, out, model, dtype="fp8", final_state="pre-norm", drafters=("dflash", "mtp"))
    s = load_sample(out, sorted(index["samples"])[0], index)  # dequantized to bf16
    aux, final = s["aux_hidden_states"], s["final_hidden_state"]
    for folder, want in zip(export_states(out, "speculators", corpus_dir), (aux, final.unsqueeze(1))):
        d = load_file(folder / "train" / "hidden_states" / "hs_0.safetensors")
        assert d["hidden_states_scales"].shape[1:] == (want.shape[1] + 1, 1), folder.name
        restored = (d["hidden_states"].float() * d["hidden_states_scales"]).bfloat16()
        assert torch.equal(restored, torch.cat([want, final.unsqueeze(1)], dim=1)), folder.name
