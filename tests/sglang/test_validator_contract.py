"""The simulator accepts and refuses the `/generate` bodies that SGLang's own validator does.

SGLang's validator is the JSON contract gate of its HTTP server (GenerateRequest.from_json_value),
loaded from the published sglang wheel by tests/sglang/sglang_validator.py. Each body below goes to
both; they must agree on accept (simulator: 200) vs refuse (simulator: 400). A row where they do not
is a finding, kept and marked xfail(strict=True) with the reason, until the simulator is fixed.

The gate is only the schema check. SGLang refuses some bodies later (TokenizerManager,
SamplingParams.verify); the rows marked "after the gate" are such bodies, which the gate admits and
the simulator, like the rest of SGLang, refuses.
"""

from __future__ import annotations

import httpx
import pytest

from tests.sglang import sglang_validator
from tests.sglang.sglang_validator import load_validator

VERSION = "0.5.23"
SP = {"max_new_tokens": 4}  # responses are 4 tokens at 5000 tokens/s: about a millisecond each

EVERY_SIMULATOR_KEY = {
    "max_new_tokens": 4, "stop": ["\n", "END"], "stop_token_ids": [2, 7], "stop_regex": "x+",
    "temperature": 0.7, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "frequency_penalty": 0.1,
    "presence_penalty": 0.2, "repetition_penalty": 1.1, "min_new_tokens": 1, "n": 1,
    "json_schema": '{"type": "object"}', "structural_tag": "{}", "ignore_eos": False,
    "skip_special_tokens": True, "spaces_between_special_tokens": True, "no_stop_trim": False,
    "custom_params": {"k": 1}, "stream_interval": 1, "logit_bias": {"5": -1.0}, "sampling_seed": 7,
}
NULLS = {k: None for k in ("max_new_tokens", "stop", "temperature", "top_k", "logit_bias", "sampling_seed",
                           "custom_params", "json_schema", "ignore_eos", "stream_interval")}
AFTER_GATE = "after the gate: SGLang's gate admits it, its {} refuses it (400) as the simulator does"


def differs(reason: str) -> pytest.MarkDecorator:
    """A known disagreement: the row must keep failing, on its assertion only (a setup error fails)."""
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)


def row(id: str, body: dict, reason: str | None = None):
    return pytest.param(body, id=id, marks=[differs(reason)] if reason else [])


CORPUS = [
    # ---- accepted by SGLang's gate
    row("input_ids", {"input_ids": [1, 2, 3], "sampling_params": SP}),
    row("input_ids_batch", {"input_ids": [[1, 2], [3, 4]], "sampling_params": SP}),
    row("input_ids_batch_params_per_item", {"input_ids": [[1], [2]], "sampling_params": [SP, {"max_new_tokens": 2}]}),
    row("text", {"text": "hello", "sampling_params": SP}),
    row("text_batch", {"text": ["a", "b"], "sampling_params": SP}),
    row("every_simulator_sampling_key", {"input_ids": [1, 2], "sampling_params": EVERY_SIMULATOR_KEY}),
    row("regex", {"input_ids": [1], "sampling_params": {**SP, "regex": "[a-z]+"}}),
    row("ebnf", {"input_ids": [1], "sampling_params": {**SP, "ebnf": 'root ::= "a"'}}),
    row("stop_as_string", {"input_ids": [1], "sampling_params": {**SP, "stop": "\n"}}),
    row("temperature_int", {"input_ids": [1], "sampling_params": {**SP, "temperature": 1}}),
    row("top_k_minus_one", {"input_ids": [1], "sampling_params": {**SP, "top_k": -1}}),
    row("beam_width", {"input_ids": [1], "sampling_params": {**SP, "beam_width": 2}}),
    row("choice", {"input_ids": [1], "sampling_params": {**SP, "choice": ["yes", "no"]}}),
    row("watermark", {"input_ids": [1], "sampling_params": {**SP, "watermark": {"enabled": False}}}),
    row("n_2", {"input_ids": [1], "sampling_params": {**SP, "n": 2}},
        "simulator differs: it serves only n == 1; SGLang admits (and serves) n > 1"),
    row("sampling_nulls", {"input_ids": [1], "sampling_params": NULLS}),
    row("sampling_params_null", {"input_ids": [1], "sampling_params": None}),
    row("sampling_params_empty", {"input_ids": [1], "sampling_params": {}}),
    row("stream_true", {"input_ids": [1], "sampling_params": SP, "stream": True}),
    row("stream_false", {"input_ids": [1], "sampling_params": SP, "stream": False}),
    row("stream_null", {"input_ids": [1], "sampling_params": SP, "stream": None}),
    row("rid", {"input_ids": [1], "sampling_params": SP, "rid": "contract-rid-1"}),
    row("rid_list_batch", {"input_ids": [[1], [2]], "sampling_params": SP, "rid": ["contract-b-1", "contract-b-2"]}),
    row("extra_top_level_keys", {"input_ids": [1], "sampling_params": SP, "model": "m", "foo": {"bar": 1},
                                 "sim_profile": "fixed:3"}),
    row("logprob_fields", {"input_ids": [1], "sampling_params": SP, "return_logprob": True, "logprob_start_len": 0,
                           "top_logprobs_num": 2, "return_hidden_states": False, "return_text_in_logprobs": True}),
    row("return_logprob_list_batch", {"input_ids": [[1], [2]], "sampling_params": SP, "return_logprob": [True, False]}),
    row("labels_and_priority", {"input_ids": [1], "sampling_params": SP, "custom_labels": {"team": "a"},
                                "priority": 1}),
    # ---- refused by SGLang's gate: sampling_params
    row("max_tokens_in_sampling_params", {"input_ids": [1], "sampling_params": {"max_tokens": 4}}),
    row("seed_in_sampling_params", {"input_ids": [1], "sampling_params": {**SP, "seed": 1}}),
    row("temperature_string", {"input_ids": [1], "sampling_params": {**SP, "temperature": "0.7"}}),
    row("max_new_tokens_float", {"input_ids": [1], "sampling_params": {"max_new_tokens": 16.0}}),
    row("max_new_tokens_bool", {"input_ids": [1], "sampling_params": {"max_new_tokens": True}}),
    row("ignore_eos_int", {"input_ids": [1], "sampling_params": {**SP, "ignore_eos": 1}}),
    row("top_k_float", {"input_ids": [1], "sampling_params": {**SP, "top_k": 20.0}}),
    row("stop_int", {"input_ids": [1], "sampling_params": {**SP, "stop": 5}}),
    row("stop_token_ids_bool", {"input_ids": [1], "sampling_params": {**SP, "stop_token_ids": [True]}}),
    row("json_schema_object", {"input_ids": [1], "sampling_params": {**SP, "json_schema": {"type": "object"}}}),
    row("logit_bias_string_value", {"input_ids": [1], "sampling_params": {**SP, "logit_bias": {"5": "high"}}}),
    row("sampling_params_string", {"input_ids": [1], "sampling_params": "greedy"}),
    # ---- refused by SGLang's gate: top-level fields
    row("return_logprob_string", {"input_ids": [1], "sampling_params": SP, "return_logprob": "yes"}),
    row("return_hidden_states_int", {"input_ids": [1], "sampling_params": SP, "return_hidden_states": 1}),
    row("stream_string", {"input_ids": [1], "sampling_params": SP, "stream": "true"}),
    row("stream_int", {"input_ids": [1], "sampling_params": SP, "stream": 1}),
    row("rid_int", {"input_ids": [1], "sampling_params": SP, "rid": 123}),
    row("rid_list_of_ints_batch", {"input_ids": [[1], [2]], "sampling_params": SP, "rid": [1, 2]}),
    row("input_ids_floats", {"input_ids": [1.0, 2.0], "sampling_params": SP}),
    row("input_ids_string", {"input_ids": "1 2 3", "sampling_params": SP}),
    row("input_ids_bools", {"input_ids": [True, False], "sampling_params": SP}),
    row("text_int", {"text": 42, "sampling_params": SP}),
    row("text_list_with_int", {"text": ["a", 1], "sampling_params": SP}),
    row("max_thinking_tokens_negative", {"input_ids": [1], "sampling_params": SP, "max_thinking_tokens": -1}),
    row("return_prompt_token_ids_null", {"input_ids": [1], "sampling_params": SP, "return_prompt_token_ids": None}),
    row("priority_string", {"input_ids": [1], "sampling_params": SP, "priority": "high"}),
    row("custom_labels_int_value", {"input_ids": [1], "sampling_params": SP, "custom_labels": {"team": 1}}),
    # ---- admitted by the gate, refused after it
    row("missing_prompt", {"sampling_params": SP}, AFTER_GATE.format("GenerateReqInput._validate_inputs")),
    row("empty_input_ids", {"input_ids": [], "sampling_params": SP},
        AFTER_GATE.format("GenerateReqInput._determine_batch_size")),
    row("max_new_tokens_negative", {"input_ids": [1], "sampling_params": {"max_new_tokens": -1}},
        AFTER_GATE.format("SamplingParams.verify")),
]


@pytest.fixture(scope="module")
def validate():
    try:
        return load_validator(VERSION)
    except RuntimeError as exc:
        pytest.fail(f"could not load SGLang {VERSION}'s validator: {exc}", pytrace=False)


@pytest.fixture
def sim(simulator):
    served = simulator(profile="fixed:4", per_request_tps=5000.0, capacity_tps=1e6, tick_s=0.005,
                       stream_interval_s=0.005)
    with httpx.Client(base_url=served.base_url, timeout=10.0) as client:
        yield client


def verdict(error: str | None) -> str:
    return "accepts" if error is None else f"refuses: {error}"


@pytest.mark.parametrize("body", CORPUS)
def test_simulator_agrees_with_sglangs_validator(validate, sim, body):
    sglang_error = validate(body)
    response = sim.post("/generate", json=body)
    assert response.status_code in (200, 400), f"simulator answered {response.status_code}: {response.text}"
    sim_error = None if response.status_code == 200 else response.text
    assert (sglang_error is None) == (sim_error is None), (
        f"SGLang {verdict(sglang_error)}; simulator {verdict(sim_error)}"
    )


def test_the_validator_is_sglangs_own():
    """Not vacuous: it refuses a key SGLang does not know and admits a plain body. It loads the
    validator itself, so that a failed download FAILS here (the fixture's users report errors)."""
    validate = load_validator(VERSION)
    error = validate({"input_ids": [1], "sampling_params": {"max_tokens": 4}})
    assert error is not None and error.startswith("unknown field `max_tokens`, expected one of"), error
    assert validate({"input_ids": [1], "sampling_params": {"max_new_tokens": 4}}) is None


def test_the_validator_is_cached_by_version(validate):
    entry = sglang_validator.entry_dir(VERSION)
    assert (entry / sglang_validator.MARKER).is_file() and (entry / sglang_validator.FILE).is_file()


def test_a_failed_download_fails_loudly_and_leaves_no_entry(tmp_path, monkeypatch):
    def no_registry(version, dest):
        raise RuntimeError("pip could not download (simulated)")

    monkeypatch.setenv("DRAFTGEN_CACHE", str(tmp_path))
    monkeypatch.setattr(sglang_validator, "download_wheel", no_registry)
    with pytest.raises(RuntimeError, match="simulated"):
        load_validator("0.0.0-test")
    assert list(tmp_path.iterdir()) == []
