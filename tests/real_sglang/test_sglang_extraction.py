"""The SGLang extraction backend on the real SGLang 0.5.23 (CPU), held to the transformers backend:
`jobrunner extract --backend sglang` run with SGLang's own Python, as the extraction pod runs it.

In float32, one rank, the states equal transformers' to float32 rounding, and most bit for bit: the
CPU's matmul kernels may take another path for SGLang's ragged batch than for one sample alone
(measured: every sample equal on one machine; on an AMD EPYC 38 of 40, the other two 8e-7 apart).
With two tensor-parallel ranks the partial sums of every row-split matmul are added by an all-reduce
in another order, so they agree to float32 rounding (measured: 2e-6 at most on this model). The corpus batches samples of 2 to 70 tokens
together; each sample is compared with the transformers backend run on that sample alone (batched
transformers pads, which moves its own fp32 results by about 1e-6)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from draftgen_contracts import exit_codes
from draftgen_dev.real_sglang.install import ensure_installed
from draftgen_dev.real_sglang.server import CPU_ENV
from draftgen_dev.tiny_model import build_tiny_llama
from jobrunner.hidden_states.store import INDEX_NAME, load_sample
from jobrunner.hidden_states.transformers_backend import TransformersBackend
from tests.corpus.conftest import merged_corpus

REPO = Path(__file__).resolve().parents[2]
# What the CPU needs of SGLang for this model (the server's own flags, as spec.server.args passes them).
CPU_SERVER_ARGS = '["--device", "cpu", "--attention-backend", "torch_native", "--max-total-tokens", "4096", ' \
                  '"--mem-fraction-static", "0.5"]'
FP32_TOLERANCE = 1e-5  # float32 rounding of this model's states: kernel paths (8e-7), two ranks (2e-6)
NUM_LAYERS = 8  # build_tiny_llama's


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_llama(tmp_path_factory.mktemp("model"), vocab_size=1024)


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    return merged_corpus(tmp_path_factory.mktemp("gen"), rows=20)


def sglang_extract(corpus_dir, out, model_dir, *args: str, env: dict[str, str] | None = None):
    """`python -m jobrunner extract --backend sglang` with SGLang's interpreter and this checkout."""
    command = [str(ensure_installed()), "-m", "jobrunner", "extract", "--backend", "sglang", "--corpus", str(corpus_dir),
               "--model", str(model_dir), "--out", str(out), "--dtype", "fp32", "--max-batch-tokens", "256",
               "--max-batch-size", "8", "--server-args", CPU_SERVER_ARGS, *args]
    return subprocess.run(command, env={**os.environ, **CPU_ENV, "PYTHONPATH": str(REPO), **(env or {})},
                          capture_output=True, text=True, timeout=300)


def reference(model_dir, out, layers: list[int], final_state: str) -> list[tuple[str, float, float]]:
    """(sample id, max |aux diff|, max |final diff|) of every stored sample against transformers run
    on that sample alone."""
    import json

    backend = TransformersBackend(str(model_dir), layers, final_state=final_state, dtype="fp32")
    index = json.loads((Path(out) / INDEX_NAME).read_text())
    diffs = []
    for sample_id in index["samples"]:
        stored = load_sample(out, sample_id, index)
        ids = stored["input_ids"].tolist()
        want = backend.extract([ids])[0]
        assert stored["aux_hidden_states"].shape == (len(ids), len(layers), 64)  # a row per token
        diffs.append((sample_id, (stored["aux_hidden_states"] - want.aux).abs().max().item(),
                      (stored["final_hidden_state"] - want.final).abs().max().item()))
    return diffs


def unequal(diffs: list[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    return [d for d in diffs if d[1] != 0.0 or d[2] != 0.0]


def assert_equal_to_fp32_rounding_most_bit_for_bit(diffs: list[tuple[str, float, float]]) -> None:
    assert max(max(aux, final) for _, aux, final in diffs) < FP32_TOLERANCE, unequal(diffs)
    assert len(unequal(diffs)) <= len(diffs) // 10, unequal(diffs)


def ran(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == exit_codes.OK, result.stderr[-3000:]


def test_its_states_equal_the_transformers_backends_to_float32_rounding(model_dir, corpus_dir, tmp_path):
    out = tmp_path / "states"
    ran(sglang_extract(corpus_dir, out, model_dir))
    diffs = reference(model_dir, out, [1, 3, 4], "post-norm")  # EAGLE-3's default layers for 8
    assert len(diffs) == 40
    assert_equal_to_fp32_rounding_most_bit_for_bit(diffs)
    index = (out / INDEX_NAME).read_text()
    assert '"backend": "sglang"' in index  # said in the states' provenance


def test_a_layer_is_the_output_of_that_decoder_layer_and_pre_norm_is_the_last_layers_output(model_dir, corpus_dir,
                                                                                            tmp_path):
    out = tmp_path / "states"
    # 0 and 6: the first and the last SGLang can capture (6 is N-2); the final state before the norm.
    ran(sglang_extract(corpus_dir, out, model_dir, "--aux-layers", "0,3,6", "--final-state", "pre-norm"))
    diffs = reference(model_dir, out, [0, 3, 6], "pre-norm")
    assert_equal_to_fp32_rounding_most_bit_for_bit(diffs)


def test_two_tensor_parallel_ranks_agree_to_float32_rounding(model_dir, corpus_dir, tmp_path):
    out = tmp_path / "states"
    # One core per rank (SGLang's CPU ranks bind to NUMA nodes unless told otherwise).
    ran(sglang_extract(corpus_dir, out, model_dir, "--tp-size", "2", env={"SGLANG_CPU_OMP_THREADS_BIND": "0|1"}))
    diffs = reference(model_dir, out, [1, 3, 4], "post-norm")
    assert max(max(aux, final) for _, aux, final in diffs) < FP32_TOLERANCE, diffs


def test_the_last_layer_is_refused_before_the_weights_load(model_dir, corpus_dir, tmp_path):
    result = sglang_extract(corpus_dir, tmp_path / "states", model_dir, "--aux-layers", f"1,3,{NUM_LAYERS - 1}")
    assert result.returncode == exit_codes.BAD_CONFIG
    assert "aux layer 7 is the model's last decoder layer" in result.stderr
    assert "max_total_num_tokens" not in result.stdout + result.stderr  # no model was loaded


def test_a_flag_that_changes_what_a_forward_returns_is_refused(model_dir, corpus_dir, tmp_path):
    result = sglang_extract(corpus_dir, tmp_path / "states", model_dir, "--server-args",
                            '["--device", "cpu", "--chunked-prefill-size", "512"]')
    assert result.returncode == exit_codes.BAD_CONFIG
    assert "--chunked-prefill-size cannot be used with extraction.backend sglang" in result.stderr
