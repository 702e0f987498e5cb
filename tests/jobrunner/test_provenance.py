"""Provenance: every generate session records the server, model, tokenizer and settings it generated
with; the merge gathers the sessions into the corpus manifest and says when they disagree."""

from __future__ import annotations

import json

from draftgen_contracts import exit_codes, provenance
from jobrunner.merge.run import merge_corpus
from jobrunner.merge.settings import MergeSettings
from jobrunner.generate.provenance import record_session
from jobrunner.generate.run import run_generate
from draftgen_simulator.config import SIM_VERSION
from tests.jobrunner.test_generate import FAST_SIM, config

QUIET = dict(log=lambda *_: None)


async def test_each_session_is_recorded_and_the_merge_gathers_them(simulator, tmp_path, tokenizer_path, prompts_file):
    sim = simulator(**FAST_SIM, profile="fixed:50")
    datasets = [{"name": "a", "path": prompts_file, "budget_tokens": 300, "max_new_tokens": 64,
                 "sampling_params": {"temperature": 0.7}, "chat_template_kwargs": {"enable_thinking": False}}]
    assert await run_generate(config(sim, tmp_path, tokenizer_path, datasets)) == exit_codes.OK
    datasets[0]["budget_tokens"] = 600  # raised: the same replica resumes, a second session
    assert await run_generate(config(sim, tmp_path, tokenizer_path, datasets)) == exit_codes.OK

    sessions = json.loads((tmp_path / "out" / "generate" / "provenance-r000.json").read_text())["sessions"]
    assert len(sessions) == 2
    first = sessions[0]
    assert first["server_version"] == SIM_VERSION and first["server"]["model_path"]
    assert "internal_states" not in first["server"] and "port" not in first["server"]
    assert first["tokenizer"]["files"]["tokenizer.json"] == provenance.file_hashes(
        tokenizer_path, ("tokenizer.json",))["tokenizer.json"]
    assert first["chat_template_sha256"] and first["draftgen_version"] != "unknown"
    assert first["datasets"]["a"] == {"chat_template_kwargs": {"enable_thinking": False},
                                      "sampling_params": {"temperature": 0.7}, "max_new_tokens": 64,
                                      "prompt_class": None, "pretokenized": False}
    assert [c["name"] for c in first["prompt_classes"]] == ["short", "long"]

    manifest = merge_corpus(tmp_path / "out", tmp_path / "corpus", MergeSettings(), **QUIET)
    assert manifest["provenance"]["sessions"] == sessions and manifest["provenance"]["differs"] == []


def test_sessions_that_disagree_are_said_in_the_manifest_and_the_log(tmp_path):
    from tests.corpus.conftest import synthetic_generation

    synthetic_generation(tmp_path, rows=4)
    base = {"replica": 0, "started_at": 1.0, "server_version": "0.5.23", "model": {"config.json": "aa"}}
    record_session(tmp_path, 0, base)
    record_session(tmp_path, 1, {**base, "replica": 1, "server_version": "0.5.24"})
    said = []
    manifest = merge_corpus(tmp_path, tmp_path / "corpus", MergeSettings(), log=said.append)
    assert manifest["provenance"]["differs"] == ["server_version"]
    assert any("WARNING: the generation sessions differ in server_version" in line for line in said)
