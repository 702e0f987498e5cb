"""SGLang's wire contract: error shapes, response parsing, sampling params and request fields."""

from __future__ import annotations

import pytest

from draftgen_contracts.sglang_protocol import (
    SAMPLING_PARAM_KINDS,
    InvalidResponse,
    InvalidSamplingParams,
    error_body,
    parse_error_message,
    parse_generate_response,
    parse_models_response,
    request_field_problem,
    validate_sampling_params,
)


@pytest.mark.parametrize(
    "body, message",
    [
        ({"error": "unexpected keyword argument 'max_tokens'"}, "unexpected keyword argument 'max_tokens'"),
        ({"error": {"message": "too long"}}, "too long"),
        ({"object": "error", "message": "queue full", "code": 503}, "queue full"),
        (b'{"error": {"message": "as bytes"}}', "as bytes"),
        ("Internal Server Error", "Internal Server Error"),
        (b"", "(empty body)"),
    ],
)
def test_error_message_from_every_shape(body, message):
    assert parse_error_message(body) == message


def _response(output_ids, completion, finish=None):
    return {
        "text": "x",
        "output_ids": output_ids,
        "meta_info": {
            "id": "r1",
            "finish_reason": finish or {"type": "stop", "matched": 2},
            "prompt_tokens": 5,
            "completion_tokens": completion,
            "cached_tokens": 1,
            "e2e_latency": 0.25,
        },
    }


def test_parse_generate_response_normalizes_the_finish_reason():
    r = parse_generate_response(_response([7, 8, 2], 3))
    assert (r.output_ids, r.finish_reason, r.prompt_tokens, r.completion_tokens) == ([7, 8, 2], "stop", 5, 3)
    assert r.rid == "r1"
    assert parse_generate_response(_response([7], 1, {"type": "length", "length": 1})).finish_reason == "length"


def test_parse_generate_response_rejects_prompt_tokens_in_output_ids():
    # the 0.5.x bug: output_ids carried part of the prompt, so they outnumber completion_tokens
    with pytest.raises(InvalidResponse, match="completion_tokens"):
        parse_generate_response(_response([1, 2, 3, 7, 8, 2], 3))


@pytest.mark.parametrize(
    "body",
    [[], {"output_ids": [1]}, {"output_ids": "12", "meta_info": {}}, _response([1], 1, {"type": "weird"})],
)
def test_parse_generate_response_rejects_malformed_bodies(body):
    with pytest.raises(InvalidResponse):
        parse_generate_response(body)


def test_parse_generate_response_accepts_an_abort_from_the_waiting_queue():
    body = {"text": "", "output_ids": [], "meta_info": {"id": "r", "finish_reason": {"type": "abort", "message": "Abort in waiting queue"}}}
    r = parse_generate_response(body)
    assert (r.finish_reason, r.completion_tokens, r.output_ids) == ("abort", 0, [])


def test_parse_models_response():
    info = parse_models_response({"object": "list", "data": [{"id": "m", "max_model_len": 4096}]})
    assert (info.model_id, info.max_model_len) == ("m", 4096)
    with pytest.raises(InvalidResponse):
        parse_models_response({"data": []})


def test_validate_accepts_the_real_keys_and_nulls():
    params = {"max_new_tokens": 16, "temperature": 0, "top_p": 0.9, "top_k": -1, "sampling_seed": 3,
              "stop_token_ids": [2], "stop": ["x"], "ignore_eos": False, "skip_special_tokens": None}
    assert validate_sampling_params(params) == params
    assert validate_sampling_params(None) == {}
    assert validate_sampling_params({"max_new_tokens": None}) == {"max_new_tokens": None}
    newer = {"beam_width": 2, "watermark": {"enabled": False}, "choice": ["yes", "no"], "logit_bias": {"5": 1.5}}
    assert validate_sampling_params(newer) == newer  # keys SGLang 0.5.23 added


@pytest.mark.parametrize("key", ["max_tokens", "seed", "temperture"])
def test_validate_rejects_unknown_keys(key):
    with pytest.raises(InvalidSamplingParams) as err:
        validate_sampling_params({key: 1})
    assert err.value.shape == "schema" and key in err.value.message


@pytest.mark.parametrize(
    "params",
    [{"temperature": "0.7"}, {"max_new_tokens": 16.0}, {"max_new_tokens": True}, {"ignore_eos": 1},
     {"stop_token_ids": [1, "2"]}, {"stop": 3}, {"logit_bias": {"5": "high"}}],
)
def test_validate_rejects_wrong_types(params):
    with pytest.raises(InvalidSamplingParams) as err:
        validate_sampling_params(params)
    assert err.value.shape == "schema"


@pytest.mark.parametrize(
    "params",
    [{"temperature": -1.0}, {"top_p": 0.0}, {"top_k": 0}, {"max_new_tokens": -1},
     {"min_new_tokens": 5, "max_new_tokens": 4}, {"regex": "a", "json_schema": "{}"}],
)
def test_validate_rejects_out_of_range_values(params):
    with pytest.raises(InvalidSamplingParams) as err:
        validate_sampling_params(params)
    assert err.value.shape == "value"


def test_the_key_list_has_sglangs_names():
    assert {"max_new_tokens", "sampling_seed", "stop_token_ids", "ignore_eos", "no_stop_trim"} <= set(SAMPLING_PARAM_KINDS)
    assert not {"max_tokens", "seed"} & set(SAMPLING_PARAM_KINDS)




@pytest.mark.parametrize("body, problem", [
    ({"input_ids": [1], "stream": True, "return_logprob": [True, False], "priority": 3}, None),
    ({"input_ids": [1], "unknown_top_level_key": {"ignored": True}}, None),
    ({"input_ids": [1], "stream": "true"}, "stream"),
    ({"input_ids": [1], "return_hidden_states": 1}, "return_hidden_states"),
    ({"input_ids": [1], "max_thinking_tokens": -1}, "max_thinking_tokens"),
    ({"input_ids": [1], "return_prompt_token_ids": None}, "return_prompt_token_ids"),
    ({"input_ids": [1], "custom_labels": {"team": 1}}, "custom_labels"),
])
def test_request_fields_are_typed_as_sglangs_schema(body, problem):
    found = request_field_problem(body)
    assert (found is None) if problem is None else found.startswith(problem + ":")


@pytest.mark.parametrize("shape, body", [
    ("schema", {"error": "m"}),
    ("value", {"error": {"message": "m"}}),
    ("request", {"object": "error", "message": "m", "type": "Bad Request", "param": None, "code": 400}),
])
def test_every_error_shape_reads_back_as_its_message(shape, body):
    assert error_body("m", shape) == body and parse_error_message(body) == "m"


def test_ids_outside_the_vocabulary_are_the_negative_ones_and_those_at_or_past_its_size():
    from draftgen_contracts.sglang_protocol import ids_outside_vocabulary
    assert ids_outside_vocabulary([0, 5, 511], 512) == []
    assert ids_outside_vocabulary([-1, 3, 512, 600], 512) == [-1, 512, 600]
