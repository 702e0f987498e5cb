"""Pure functions of the SGLang protocol (draftgen_contracts.sglang_protocol) and the client's rids and retry rule."""

from __future__ import annotations

import asyncio
import itertools
import random

import aiohttp
import pytest

from draftgen_contracts.sglang_protocol import (
    SAMPLING_PARAM_KINDS,
    InvalidResponse,
    InvalidSamplingParams,
    parse_error_message,
    parse_generate_response,
    parse_models_response,
    validate_sampling_params,
)
from jobrunner.sglang.retry import backoff_delay, is_retryable
from jobrunner.sglang.rids import make_rid, retry_rid


@pytest.mark.parametrize("status", [500, 502, 503, 504, 429, 408])
def test_server_side_statuses_are_retryable(status):
    assert is_retryable(status)


@pytest.mark.parametrize("status", [400, 401, 404, 413, 422])
def test_request_errors_are_not_retryable(status):
    assert not is_retryable(status)


def test_transport_failures_are_retryable_other_exceptions_not():
    assert is_retryable(aiohttp.ServerDisconnectedError())
    assert is_retryable(aiohttp.ClientOSError(104, "Connection reset by peer"))
    assert is_retryable(aiohttp.ClientPayloadError("cut mid-body"))
    assert is_retryable(asyncio.TimeoutError())
    assert not is_retryable(InvalidResponse("bad"))
    assert not is_retryable(ValueError("x"))


def test_backoff_is_full_jitter_under_a_capped_exponential():
    rng = random.Random(1)
    for attempt in range(1, 12):
        ceiling = min(8.0, 0.5 * 2 ** (attempt - 1))
        draws = [backoff_delay(attempt, 0.5, 8.0, rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in draws)
        assert max(draws) > 0.5 * ceiling  # jitter spreads over the whole window
    assert backoff_delay(1000, 0.5, 8.0, rng) <= 8.0
    with pytest.raises(ValueError):
        backoff_delay(0, 0.5, 8.0, rng)


def test_backoff_is_reproducible_from_the_seed():
    a = [backoff_delay(3, 1.0, 30.0, random.Random(7)) for _ in range(3)]
    b = [backoff_delay(3, 1.0, 30.0, random.Random(7)) for _ in range(3)]
    assert a == b


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
    assert (r.cached_tokens, r.e2e_latency, r.rid) == (1, 0.25, "r1")
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


@pytest.mark.parametrize("key", ["max_tokens", "seed", "temperture"])
def test_validate_rejects_unknown_keys(key):
    with pytest.raises(InvalidSamplingParams) as err:
        validate_sampling_params({key: 1})
    assert err.value.kind == "unknown_key" and key in err.value.message


@pytest.mark.parametrize(
    "params",
    [{"temperature": "0.7"}, {"max_new_tokens": 16.0}, {"max_new_tokens": True}, {"ignore_eos": 1},
     {"stop_token_ids": [1, "2"]}, {"stop": 3}],
)
def test_validate_rejects_wrong_types(params):
    with pytest.raises(InvalidSamplingParams) as err:
        validate_sampling_params(params)
    assert err.value.kind == "type"


@pytest.mark.parametrize(
    "params",
    [{"temperature": -1.0}, {"top_p": 0.0}, {"top_k": 0}, {"max_new_tokens": -1},
     {"min_new_tokens": 5, "max_new_tokens": 4}, {"regex": "a", "json_schema": "{}"}],
)
def test_validate_rejects_out_of_range_values(params):
    with pytest.raises(InvalidSamplingParams) as err:
        validate_sampling_params(params)
    assert err.value.kind == "value"


def test_the_key_list_has_sglangs_names():
    assert {"max_new_tokens", "sampling_seed", "stop_token_ids", "ignore_eos", "no_stop_trim"} <= set(SAMPLING_PARAM_KINDS)
    assert not {"max_tokens", "seed"} & set(SAMPLING_PARAM_KINDS)


def test_rids_are_fixed_width_so_none_is_a_prefix_of_another():
    rids = {make_rid(run, f"ds/{row:09d}", attempt)
            for run, row, attempt in itertools.product(["run-a", "run-b"], range(300), range(3))}
    rids |= {retry_rid(r, k) for r in list(rids)[:100] for k in (1, 2)}
    assert len({len(r) for r in rids}) == 1
    ordered = sorted(rids)
    # in sorted order a prefix would sit right before a string it prefixes
    assert not any(b.startswith(a) for a, b in zip(ordered, ordered[1:]))
    assert make_rid("run-a", "ds/000000001", 0) == make_rid("run-a", "ds/000000001", 0)
    assert make_rid("run-a", "ds/000000001", 0) != make_rid("run-a", "ds/000000001", 1)
