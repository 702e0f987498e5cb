"""Existing traces (a dataset of kind `traces`): rendered or taken as token ids, written as records of
their own, within the budget, never sent to the server; and what the preflight refuses of them."""

from __future__ import annotations

import json

import pytest

from draftgen_contracts import exit_codes
from draftgen_dev.demo_assets import write_traces
from jobrunner.shared.datasets import Trace
from jobrunner.generate.run import run_generate
from jobrunner.preflight.problem import PreflightProblem
from jobrunner.shared.prompts import PromptPreparer, load_tokenizer, render_trace
from tests.jobrunner.test_generate import FAST_SIM, config, records


def test_a_message_trace_renders_to_the_prompt_generation_sends_and_its_response(tokenizer_path):
    tokenizer = load_tokenizer(tokenizer_path)
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}]
    prompt, response = render_trace(tokenizer, Trace(0, messages=messages), {})
    assert prompt == tokenizer.apply_chat_template(messages[:1], add_generation_prompt=True, tokenize=True)["input_ids"]
    assert tokenizer.decode(response).startswith("hello there") and response[-1] == tokenizer.convert_tokens_to_ids(
        "<|im_end|>")


def test_with_thinking_off_the_prompt_keeps_its_empty_thinking_block_and_the_response_follows(tokenizer_path):
    tokenizer = load_tokenizer(tokenizer_path)
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}]
    prompt, response = render_trace(tokenizer, Trace(0, messages=messages), {"enable_thinking": False})
    assert tokenizer.decode(prompt).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert tokenizer.decode(response) == "hello there<|im_end|>"


async def test_traces_are_kept_as_they_are_within_the_budget_and_never_sent(simulator, tmp_path, tokenizer_path,
                                                                           prompts_file):
    sim = simulator(**FAST_SIM, profile="fixed:40")
    traces = write_traces(tmp_path / "traces.jsonl", 60, tokenizer_path)
    datasets = [{"name": "kept", "path": traces, "kind": "traces", "budget_tokens": 300},
                {"name": "fresh", "path": prompts_file, "budget_tokens": 200}]
    assert await run_generate(config(sim, tmp_path, tokenizer_path, datasets)) == exit_codes.OK
    kept = records(tmp_path, "kept")
    assert kept and all(r["source"] == "trace" and r["sampling_params"] == {} for r in kept)
    tokens = [r["completion_tokens"] for r in kept]
    assert sum(tokens) >= 300 > sum(tokens) - max(tokens)  # the budget, within one trace
    # Only the prompts dataset asked the server: every answer that came back whole is one of its records
    # (requests in flight when its budget filled come back aborted, and are not records).
    fresh = records(tmp_path, "fresh")
    assert sim.stats.completed == len(fresh) and sim.stats.requests == len(fresh) + sim.stats.aborted
    by_row = {r["row"]: r for r in kept}
    source = [json.loads(line) for line in open(traces)]
    odd = min(row for row in by_row if row % 2)
    assert by_row[odd]["input_ids"] + by_row[odd]["output_ids"] == source[odd]["input_ids"]

    # Raised past what the file holds: the run resumes, takes every other trace once, and is Exhausted.
    datasets[0]["budget_tokens"] = 10**6
    assert await run_generate(config(sim, tmp_path, tokenizer_path, datasets)) == exit_codes.OK
    rows = [r["row"] for r in records(tmp_path, "kept")]
    assert sorted(rows) == list(range(60))


def test_the_preflight_refuses_traces_of_another_tokenizer(tmp_path, tokenizer_path):
    from draftgen_contracts.prompt_classes import DEFAULT_PROMPT_CLASSES
    from jobrunner.preflight.dataset_scan import scan_dataset
    from jobrunner.shared.prompts import load_tokenizer as load

    tokenizer = load(tokenizer_path)
    preparer = PromptPreparer(tokenizer, {}, DEFAULT_PROMPT_CLASSES, 4096)
    end = frozenset({tokenizer.convert_tokens_to_ids("<|im_end|>")})
    good = write_traces(tmp_path / "good.jsonl", 10, tokenizer_path)
    found = scan_dataset("good", good, preparer, 100, 512, traces=True, end_ids=end)
    assert found.usable_rows == 10 and found.expected_response_tokens > 0  # exact: the traces' own lengths

    other = tmp_path / "other.jsonl"  # ids of another tokenizer: no response ends with this one's end token
    other.write_text("".join(json.dumps({"input_ids": [11, 12, 13, 14 + i], "prompt_len": 2}) + "\n" for i in range(5)))
    with pytest.raises(PreflightProblem, match="none of its 5 traces ended by stop ends with one of this model's end"):
        scan_dataset("other", str(other), preparer, 100, 512, traces=True, end_ids=end)
    outside = tmp_path / "outside.jsonl"
    outside.write_text(json.dumps({"input_ids": [11, 12, 9999], "prompt_len": 2}) + "\n")
    with pytest.raises(PreflightProblem) as raised:
        scan_dataset("outside", str(outside), preparer, 100, 512, traces=True, end_ids=end)
    assert raised.value.problem.where == f"{outside}: row 0: input_ids"
    assert "id 9999 (the tokenizer has 461): were these traces made with another tokenizer?" in str(raised.value)
