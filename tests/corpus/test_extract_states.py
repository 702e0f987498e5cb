"""`jobrunner extract` with a real (tiny, random) Llama: layers, padding, storage, resume, estimate."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from draftgen_contracts import names
from draftgen_contracts.extraction_progress import parse_extraction_progress
from draftgen_contracts.hidden_state_layout import bytes_per_token
from draftgen_dev.tiny_model import build_tiny_llama
from jobrunner.shared import corpus
from jobrunner.cli import main as cli_main
from jobrunner.hidden_states.extract import extract
from jobrunner.hidden_states import selection
from jobrunner.hidden_states.extraction_settings import ExtractionSettings
from jobrunner.hidden_states.store import INDEX_NAME, load_sample
from jobrunner.hidden_states.transformers_backend import TransformersBackend
from tests.corpus.conftest import merged_corpus

REPO = Path(__file__).resolve().parents[2]
QUIET = dict(log=lambda *_: None)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_llama(tmp_path_factory.mktemp("model"), vocab_size=1024)


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    return merged_corpus(tmp_path_factory.mktemp("gen"), rows=30)


@pytest.fixture(scope="module")
def model(model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir).eval()


def fp32_extract(corpus_dir, out, model_dir, publish=None, **settings):
    settings = {"splits": ("train", "eval"), "dtype": "fp32", "max_batch_tokens": 256, "max_batch_size": 8, **settings}
    return extract(corpus_dir, out, model_dir, ExtractionSettings(**settings), publish=publish, **QUIET)


# --- pure decisions --------------------------------------------------------------------------------

def test_default_layers_match_eagle3():
    assert selection.default_aux_layers(32) == [1, 15, 28]
    assert selection.default_aux_layers(61) == [1, 29, 57]
    assert selection.hidden_state_indices(selection.default_aux_layers(61)) == [2, 30, 58]  # = {2, N//2, N-3}


def test_layer_check_names_the_valid_range():
    selection.check_aux_layers([1, 3, 4], 8)
    with pytest.raises(ValueError, match=r"\[8\] do not exist.*8 decoder layers.*0\.\.7"):
        selection.check_aux_layers([1, 3, 8], 8)
    with pytest.raises(ValueError, match="repeat"):
        selection.check_aux_layers(selection.default_aux_layers(6), 6)


def test_length_action():
    assert selection.length_action(10, 4, None, "skip") == ("keep", 10)
    assert selection.length_action(10, 4, 10, "skip") == ("keep", 10)
    assert selection.length_action(11, 4, 10, "skip") == ("skip", "too_long")
    assert selection.length_action(11, 4, 10, "truncate") == ("keep", 10)
    assert selection.length_action(11, 10, 10, "truncate") == ("skip", "no_response_token_within_max_len")


def test_plan_batches_fit_and_cover():
    lengths = [5, 50, 7, 50, 120, 1, 33, 64, 64, 2]
    batches = selection.plan_batches(lengths, max_batch_tokens=128, max_batch_size=3)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) <= 3 and max(lengths[i] for i in b) * len(b) <= 128
    assert batches[0] == [4]  # longest first


def test_bytes_per_token_matches_reference():
    assert bytes_per_token(7168, 3, "bf16") == 8 * 7168 + 9  # docs/eagle3.md: 8H+16 with an int64 mask, less 7 bytes


# --- the states ------------------------------------------------------------------------------------

def test_padding_sides_with_default_positions(model):
    """Pins what the backend's docstring says: right padding reproduces the lone sample; left padding
    shifts positions, which Llama's RoPE happens to tolerate, but its states sit in the last rows."""
    seq = torch.tensor([[11, 12, 13, 14, 15]])
    alone = model.base_model(input_ids=seq).last_hidden_state[0]
    left = model.base_model(input_ids=torch.cat([torch.zeros(1, 3, dtype=torch.long), seq], 1),
                            attention_mask=torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])).last_hidden_state[0, 3:]
    right = model.base_model(input_ids=torch.cat([seq, torch.zeros(1, 3, dtype=torch.long)], 1),
                             attention_mask=torch.tensor([[1, 1, 1, 1, 1, 0, 0, 0]])).last_hidden_state[0, :5]
    torch.testing.assert_close(right, alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(left, alone, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype, tol", [("fp32", 1e-5), ("bf16", 3e-2)])
def test_batched_equals_one_at_a_time(model_dir, dtype, tol):
    backend = TransformersBackend(model_dir, None, dtype=dtype)
    seqs = [[7] * 3, list(range(10, 50)), list(range(100, 117)), [900, 901], list(range(300, 340))]
    batched = backend.extract(seqs)
    for seq, got in zip(seqs, batched):
        alone = backend.extract([seq])[0]
        assert got.aux.shape == (len(seq), 3, 64) and got.final.shape == (len(seq), 64)
        torch.testing.assert_close(got.aux.float(), alone.aux.float(), atol=tol, rtol=tol)
        torch.testing.assert_close(got.final.float(), alone.final.float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("final_state", ["post-norm", "pre-norm"])
def test_saved_states_equal_output_hidden_states(corpus_dir, model_dir, model, tmp_path, final_state):
    out = tmp_path / "states"
    index = fp32_extract(corpus_dir, out, model_dir, final_state=final_state)
    records = {r["sample_id"]: r for r in corpus.iter_corpus(corpus_dir)}
    assert set(index["samples"]) == set(records)
    indices = [2, 4, 5]  # 8 layers: output_hidden_states {2, N//2, N-3}
    assert index["run"]["hidden_state_indices"] == indices
    for sid in sorted(records)[::7]:
        saved = load_sample(out, sid, index)
        ids = records[sid]["input_ids"]
        with torch.no_grad():
            hs = model.base_model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
        for k, i in enumerate(indices):
            torch.testing.assert_close(saved["aux_hidden_states"][:, k], hs[i][0], atol=1e-5, rtol=1e-5)
        final = saved["final_hidden_state"]
        if final_state == "post-norm":
            torch.testing.assert_close(final, hs[-1][0], atol=1e-5, rtol=1e-5)
        else:
            assert not torch.allclose(final, hs[-1][0], atol=1e-2)
            with torch.no_grad():
                torch.testing.assert_close(model.base_model.norm(final), hs[-1][0], atol=1e-5, rtol=1e-5)
        assert saved["input_ids"].tolist() == ids
        assert saved["loss_mask"].tolist() == records[sid]["loss_mask"]


def test_storage_is_unpadded(corpus_dir, model_dir, tmp_path):
    from safetensors import safe_open

    out = tmp_path / "states"
    index = fp32_extract(corpus_dir, out, model_dir, shard_mb=0.05)
    lengths = [len(r["input_ids"]) for r in corpus.iter_corpus(corpus_dir)]
    assert index["tokens"] == sum(lengths) and len(index["shards"]) > 3
    for s in index["shards"]:
        with safe_open(str(out / s["name"]), "pt") as f:
            offsets = f.get_tensor("offsets")
            assert f.get_slice("aux_hidden_states").get_shape() == [int(offsets[-1]), 3, 64]
            assert f.get_slice("input_ids").get_shape() == [int(offsets[-1])]
    payload = sum(lengths) * bytes_per_token(64, 3, "fp32")
    on_disk = sum(s["bytes"] for s in index["shards"])
    assert payload <= on_disk < payload * 1.05  # headers and offsets only


def test_max_len_policies(corpus_dir, model_dir, tmp_path):
    records = list(corpus.iter_corpus(corpus_dir))
    idx = fp32_extract(corpus_dir, tmp_path / "skip", model_dir, max_len=40, too_long="skip")
    assert idx["skipped"]["too_long"] == sum(len(r["input_ids"]) > 40 for r in records)
    idx = fp32_extract(corpus_dir, tmp_path / "cut", model_dir, max_len=40, too_long="truncate")
    no_response = sum(len(r["input_ids"]) > 40 and r["prompt_len"] >= 40 for r in records)
    assert idx["skipped"].get("no_response_token_within_max_len", 0) == no_response
    assert len(idx["samples"]) == len(records) - no_response
    assert max(s["length"] for s in idx["samples"].values()) == 40


def test_the_progress_is_published_and_written_beside_the_states_and_ends_as_the_index(corpus_dir, model_dir,
                                                                                       tmp_path):
    published = []
    index = fp32_extract(corpus_dir, tmp_path / "o", model_dir, shard_mb=0.05, publish=published.append)
    last = parse_extraction_progress(published[-1])
    assert last == parse_extraction_progress((tmp_path / "o" / names.EXTRACTION_KEY).read_text())
    manifest = corpus.read_manifest(corpus_dir)
    assert last.finished and last.tokens == index["tokens"] and last.samples == len(index["samples"])
    assert last.corpus_tokens == sum(s["tokens"] for s in manifest["splits"].values()) and last.tokens_per_second > 0
    # A publisher that fails costs the progress, never the states.
    def refused(_):
        raise RuntimeError("403 Forbidden")
    said = []
    again = extract(corpus_dir, tmp_path / "p", model_dir, ExtractionSettings(splits=("train", "eval"), dtype="fp32"),
                    publish=refused, log=said.append)
    assert any("could not publish the progress: 403 Forbidden" in line for line in said)
    assert again["complete"] and json.loads((tmp_path / "p" / names.EXTRACTION_KEY).read_text())["finished"]


def test_estimate_written_before_the_weights_load(corpus_dir, model_dir, tmp_path):
    def no_backend(*_):
        raise RuntimeError("weights would load here")

    with pytest.raises(RuntimeError):
        extract(corpus_dir, tmp_path / "o", model_dir, ExtractionSettings(splits=("train",)), make_backend=no_backend,
                **QUIET)
    est = json.loads((tmp_path / "o" / "estimate.json").read_text())
    tokens = corpus.read_manifest(corpus_dir)["splits"]["train"]["tokens"]
    assert est["tokens"] == tokens and est["bytes_per_token"] == 8 * 64 + 9
    assert est["bytes"] == tokens * est["bytes_per_token"] and est["aux_layers"] == [1, 3, 4]


def test_bad_layers_and_changed_settings_are_clear_errors(corpus_dir, model_dir, tmp_path, capsys):
    args = ["extract", "--corpus", str(corpus_dir), "--model", model_dir, "--out", str(tmp_path / "o"), "--dtype", "fp32"]
    assert cli_main(args + ["--aux-layers", "1,3,8"]) == 2
    assert "do not exist" in capsys.readouterr().err
    assert cli_main(args + ["--split", "eval"]) == 0
    assert cli_main(args + ["--split", "eval", "--final-state", "pre-norm"]) == 2
    assert "final_state" in capsys.readouterr().err
    # Another backend on the same states (they agree bit for bit in fp32 only): refused before it loads.
    assert cli_main(args + ["--split", "eval", "--backend", "sglang"]) == 2
    assert "written with backend='transformers', this run has 'sglang'" in capsys.readouterr().err


def test_fp8_states_are_e4m3_with_a_scale_per_token_and_state_and_half_the_bytes(corpus_dir, model_dir, tmp_path):
    from safetensors import safe_open

    bf16 = extract(corpus_dir, tmp_path / "bf16", model_dir, ExtractionSettings(("train",), dtype="bf16"), **QUIET)
    fp8 = extract(corpus_dir, tmp_path / "fp8", model_dir, ExtractionSettings(("train",), dtype="fp8"), **QUIET)
    tokens = fp8["tokens"]
    assert bytes_per_token(64, 3, "fp8") == 4 * 64 + 4 * 4 + 9
    assert tokens * bytes_per_token(64, 3, "fp8") <= fp8["bytes"] < tokens * bytes_per_token(64, 3, "fp8") * 1.05
    with safe_open(str(tmp_path / "fp8" / fp8["shards"][0]["name"]), "pt") as f:
        assert f.get_slice("aux_hidden_states").get_dtype() == "F8_E4M3"
        assert f.get_slice("aux_hidden_states_scales").get_shape()[1:] == [3, 1]
        assert f.get_slice("final_hidden_state_scales").get_dtype() == "F32"
    for sid in bf16["samples"]:
        want, got = load_sample(tmp_path / "bf16", sid, bf16), load_sample(tmp_path / "fp8", sid, fp8)
        assert got["aux_hidden_states"].dtype == torch.bfloat16 and torch.equal(got["input_ids"], want["input_ids"])
        for name in ("aux_hidden_states", "final_hidden_state"):
            w, g = want[name].float(), got[name].float()
            # e4m3 keeps 3 mantissa bits: within half a step (1/16) of each value's own scale.
            assert ((g - w).norm(dim=-1) / w.norm(dim=-1)).max() < 0.07, (sid, name)


@pytest.mark.parametrize("dtype", ["fp32", "fp8"])
def test_sigkill_then_resume_gives_the_same_tensors(corpus_dir, model_dir, tmp_path, dtype):
    common = ["--corpus", str(corpus_dir), "--model", model_dir, "--dtype", dtype, "--max-batch-size", "2",
              "--max-batch-tokens", "128", "--shard-mb", "0.02"]
    clean = tmp_path / "clean"
    assert cli_main(["extract", *common, "--out", str(clean)]) == 0

    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "jobrunner.cli", "extract", *common, "--out", str(killed)],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not list(killed.glob("shard-*.safetensors")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    partial = len(list(killed.glob("shard-*.safetensors")))
    assert partial >= 1 and not (killed / INDEX_NAME).exists()

    assert cli_main(["extract", *common, "--out", str(killed)]) == 0
    a = json.loads((clean / INDEX_NAME).read_text())
    b = json.loads((killed / INDEX_NAME).read_text())
    assert set(a["samples"]) == set(b["samples"]) and b["complete"]
    for sid in a["samples"]:
        x, y = load_sample(clean, sid, a, dequantize=False), load_sample(killed, sid, b, dequantize=False)
        assert set(x) == set(y)
        for k in x:
            assert torch.equal(x[k], y[k]), (sid, k)
    assert not list(killed.glob("*.tmp"))
