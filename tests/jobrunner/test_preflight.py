"""`jobrunner preflight` with a real tokenizer and a tiny real model's folder: what it finds in the
quickstart's datasets, and each thing that makes a run impossible, named by file, row and field."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from draftgen_contracts import exit_codes
from draftgen_contracts.sglang_auth import ServerKeys
from draftgen_dev.builders import generate_config
from draftgen_dev.demo_assets import (
    TEMPLATE_REFUSING_TOOL_CALLS,
    UNUSABLE_ROWS,
    build_model,
    model_with_template,
    write_datasets,
)
from jobrunner.preflight.problem import PreflightProblem
from jobrunner.preflight.run import run_preflight
from jobrunner.preflight.served_model import check_served_model

BAD_ROWS = {"bad_json": 1, "no_user_turn": 1, "unknown_role": 1}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return build_model(tmp_path_factory.mktemp("model") / "tiny")


@pytest.fixture
def prompts(tmp_path):
    return write_datasets(tmp_path / "prompts", rows_per_dataset=120)


def config_for(tmp_path, model, datasets, **overrides):
    return generate_config("http://127.0.0.1:1", tmp_path / "out", model, datasets, **{
        "prompt_classes": [{"name": "short", "max_prompt_tokens": 512, "concurrency": 4, "max_new_tokens": 400},
                           {"name": "long", "concurrency": 2, "max_new_tokens": 600}], **overrides})


def quickstart(prompts, budget=20000):
    return [{"name": name, "path": str(path), "budget_tokens": budget} for name, path in prompts.items()]


def test_the_quickstart_datasets_are_scanned_once_with_every_finding(tmp_path, model, prompts):
    findings = run_preflight(config_for(tmp_path, model, quickstart(prompts)), str(model))
    assert findings.problem is None
    assert findings.model.hidden_size == 64 and findings.model.num_layers == 8 and findings.tokenizer.has_chat_template
    chat, tools, sharegpt = findings.datasets
    assert (chat.rows, chat.usable_rows, chat.skipped_by_reason) == (123, 120, BAD_ROWS)
    assert (sharegpt.rows, sharegpt.usable_rows, sharegpt.skipped_by_reason) == (120, 120, {})
    assert tools.shapes == {"tools + tool calls + tool results": 120}
    assert set(chat.shapes) == {"plain chat"} and chat.prompt_tokens > 120
    assert chat.classes["short"].count == 120 and chat.classes["short"].max <= 512
    assert all(d.budget_reachable for d in findings.datasets)


def test_the_command_writes_its_findings_and_warns_of_a_budget_out_of_reach(tmp_path, model, prompts):
    config = tmp_path / "generate.json"
    config.write_text(config_for(tmp_path, model, quickstart(prompts, budget=10**9)).model_dump_json())
    proc = subprocess.run([sys.executable, "-m", "jobrunner.cli", "preflight", "--config", str(config),
                           "--model", str(model)], capture_output=True, text=True)
    assert proc.returncode == exit_codes.OK, proc.stderr  # a warning, not a failure
    assert "chat: 123 rows, 120 usable" in proc.stdout and "the budget looks out of reach" in proc.stdout
    written = json.loads((tmp_path / "out" / "preflight.json").read_text())
    assert written["problem"] is None and written["datasets"][0]["budget_reachable"] is False
    assert written["rows_per_second"] > 0


def problem_of(tmp_path, model, datasets, model_dir=None):
    findings = run_preflight(config_for(tmp_path, model, datasets), str(model_dir or model))
    assert findings.problem is not None
    return findings.problem


def test_a_model_folder_without_config_json_is_named(tmp_path, model, prompts):
    empty = tmp_path / "no-model"
    empty.mkdir()
    problem = problem_of(tmp_path, model, quickstart(prompts), model_dir=empty)
    assert problem.where == f"{empty}/config.json" and "not found" in problem.message


def tokenizer_copy(model, tmp_path, template):
    return model_with_template(model, tmp_path / "tokenizer", template)


def test_a_tokenizer_without_a_chat_template_is_refused(tmp_path, model, prompts):
    tokenizer = tokenizer_copy(model, tmp_path, None)
    problem = problem_of(tmp_path, tokenizer, quickstart(prompts), model_dir=model)
    assert problem.where == str(tokenizer) and "no chat template" in problem.message


def test_a_template_that_fails_on_tool_calls_names_the_file_the_row_and_the_field(tmp_path, model, prompts):
    tokenizer = tokenizer_copy(model, tmp_path, TEMPLATE_REFUSING_TOOL_CALLS)
    problem = problem_of(tmp_path, tokenizer, quickstart(prompts), model_dir=model)
    assert problem.where == f"{prompts['tools']}: row 3: messages"  # rows 0-2 are the malformed ones
    assert "tools + tool calls + tool results" in problem.message and "tool calls are not supported" in problem.message


def test_a_prompt_file_with_no_usable_row_is_refused_with_its_reasons(tmp_path, model):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(UNUSABLE_ROWS)
    problem = problem_of(tmp_path, model, [{"name": "bad", "path": str(bad), "budget_tokens": 100}])
    assert problem.where == str(bad) and problem.message == "no usable row in 2 (bad_json 1, no_user_turn 1)"


def test_a_token_outside_the_models_vocabulary_is_named_by_row_and_field(tmp_path, model):
    ids = tmp_path / "ids.jsonl"
    ids.write_text(json.dumps({"input_ids": [5, 6, 7]}) + "\n" + json.dumps({"input_ids": [5, 99999]}) + "\n")
    problem = problem_of(tmp_path, model, [{"name": "ids", "path": str(ids), "budget_tokens": 100,
                                            "pretokenized": True}])
    assert problem.where == f"{ids}: row 1: input_ids" and "99999" in problem.message


def test_a_missing_prompt_file_is_named_before_anything_is_read(tmp_path, model):
    problem = problem_of(tmp_path, model, [{"name": "gone", "path": str(tmp_path / "gone.jsonl"), "budget_tokens": 9}])
    assert problem.where == "the run's inputs" and f"{tmp_path / 'gone.jsonl'}: no such file" in problem.message


def test_the_simulator_of_another_model_is_refused_and_its_own_passes(simulator):
    sim = simulator(model_path="/models/tiny")
    check_served_model(sim.base_url, "tiny", ServerKeys())
    with pytest.raises(PreflightProblem, match="serves .*/models/tiny.*not 'kimi-k2.5'"):
        check_served_model(sim.base_url, "kimi-k2.5", ServerKeys())


def test_a_server_that_takes_an_api_key_without_one_is_said_so(simulator):
    sim = simulator(api_key="secret", model_path="/models/tiny")
    with pytest.raises(PreflightProblem, match="server.endpoint.apiKey"):
        check_served_model(sim.base_url, "tiny", ServerKeys())
    check_served_model(sim.base_url, "tiny", ServerKeys(api_key="secret"))


def test_the_preflight_of_a_server_that_already_runs_refuses_one_serving_another_model(tmp_path, model, prompts,
                                                                                       simulator):
    """config.served_model_name, set by the plan for spec.server.endpoint: the whole preflight stops at the
    server's /v1/models before reading a row."""
    sim = simulator(model_path="/models/another")
    config = config_for(tmp_path, model, quickstart(prompts)).model_copy(
        update={"server_url": sim.base_url, "served_model_name": "tiny"})
    findings = run_preflight(config, str(model))
    assert "serves ['/models/another'], not 'tiny'" in findings.problem.message and not findings.datasets
    ok = simulator(model_path="/models/tiny")
    assert run_preflight(config.model_copy(update={"server_url": ok.base_url}), str(model)).problem is None
