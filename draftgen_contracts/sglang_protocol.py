"""SGLang's native /generate wire contract, without any HTTP library (docs/sglang.md).

- `sampling_params`: the keys SGLang's `SamplingParams` takes, their JSON types and the range
  checks of its `verify()`, with SGLang's own wording, so a bad manifest fails before any GPU time
  (docs/sglang.md#the-generate-request);
- the three shapes of an error body and which statuses are worth retrying
  (docs/sglang.md#errors);
- a response's parsing, with `completion_tokens == len(output_ids)` enforced
  (docs/sglang.md#the-response).

The client (jobrunner.sglang) and the simulator (draftgen_simulator) both use this module.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

# How a server command launches SGLang (`python -m sglang.launch_server`): what precedes it is the
# image's Python, which the SGLang extraction backend runs `-m jobrunner` with.
SGLANG_LAUNCHER = ("-m", "sglang.launch_server")


def sglang_python(command: list[str]) -> list[str] | None:
    """The interpreter part of a server command that launches SGLang, or None when it does not."""
    n = len(SGLANG_LAUNCHER)
    return list(command[:-n]) if len(command) > n and tuple(command[-n:]) == SGLANG_LAUNCHER else None


# Every key of SGLang 0.5.23's `SamplingParams` and the JSON type it takes
# (docs/sglang.md#sampling-params). `null` is accepted for every key and means the default.
SAMPLING_PARAM_KINDS: dict[str, str] = {
    "max_new_tokens": "int",
    "stop": "str_or_str_list",
    "stop_token_ids": "int_list",
    "stop_regex": "str_or_str_list",
    "temperature": "float",
    "top_p": "float",
    "top_k": "int",
    "min_p": "float",
    "frequency_penalty": "float",
    "presence_penalty": "float",
    "repetition_penalty": "float",
    "min_new_tokens": "int",
    "n": "int",
    "json_schema": "str",
    "regex": "str",
    "ebnf": "str",
    "structural_tag": "str",
    "ignore_eos": "bool",
    "skip_special_tokens": "bool",
    "spaces_between_special_tokens": "bool",
    "no_stop_trim": "bool",
    "custom_params": "any",
    "stream_interval": "int",
    "logit_bias": "float_dict",
    "sampling_seed": "int",
    "beam_width": "int",
    "watermark": "dict",
    "choice": "str_list",
}

# The top-level /generate fields whose type SGLang's request schema checks and that a caller of
# draftgen may plausibly send; other top-level keys are ignored by SGLang, and so here.
REQUEST_FIELD_KINDS: dict[str, str] = {
    "rid": "str_or_str_list",
    "text": "str_or_str_list",
    "stream": "bool",
    "return_logprob": "bool_or_bool_list",
    "return_hidden_states": "bool_or_bool_list",
    "return_text_in_logprobs": "bool",
    "logprob_start_len": "int_or_int_list",
    "top_logprobs_num": "int_or_int_list",
    "priority": "int",
    "require_reasoning": "bool",
    "routing_key": "str",
    "session_id": "str",
    "max_thinking_tokens": "uint",
    "return_prompt_token_ids": "bool",
    "custom_labels": "str_dict",
}
REQUEST_FIELDS_NOT_NULL = frozenset({"return_prompt_token_ids"})  # the one field whose schema has no null

# SGLang's defaults for the keys that change what comes back (docs/sglang.md#the-generate-request).
SAMPLING_PARAM_DEFAULTS: dict[str, Any] = {
    "max_new_tokens": 128,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": -1,
    "min_p": 0.0,
    "stop": None,
    "stop_token_ids": None,
    "skip_special_tokens": True,
    "no_stop_trim": False,
    "ignore_eos": False,
    "n": 1,
    "sampling_seed": None,
}


class SGLangError(Exception):
    """Base of every error this module raises."""


class BadRequest(SGLangError):
    """The server (or the same check here) refused the request; retrying cannot help."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status

    @property
    def skip_reason(self) -> str:
        """The reason its row is skipped with."""
        return f"http_{self.status}"


class TokenOutsideVocabulary(BadRequest):
    """A prompt holds an id the model's embedding table has no row for. Never sent: SGLang 0.5.23's
    scheduler dies on it with an IndexError, and every request of the server with it (docs/sglang.md)."""

    skip_reason = "token_outside_vocabulary"


def ids_outside_vocabulary(input_ids: list[int], vocab_size: int) -> list[int]:
    """The ids of a prompt that no model with `vocab_size` embeddings can take (negative, or at or
    past the table's size)."""
    return [t for t in input_ids if not 0 <= t < vocab_size]


class InvalidSamplingParams(BadRequest):
    """A sampling_params problem. `shape` says which of SGLang's checks it fails, each answering in
    its own error shape (`error_body`): "schema" (an unknown key, a wrong type) or "value" (a range)."""

    def __init__(self, message: str, shape: str):
        super().__init__(message)
        self.shape = shape


class InvalidResponse(SGLangError):
    """A 200 response that breaks the contract (e.g. completion_tokens != len(output_ids))."""


class KeysRefused(SGLangError):
    """The server answered 401 or 403: the key draftgen holds is not the one it was started with
    (docs/security.md#the-servers-keys). No row is at fault and no retry helps."""


class ServerNotReady(SGLangError):
    """The server did not become ready within the startup timeout."""


class RequestFailed(SGLangError):
    """Retries ran out on retryable failures; `last_error` is the final one."""

    def __init__(self, message: str, attempts: int, last_error: BaseException | int | None):
        super().__init__(message)
        self.attempts = attempts
        self.last_error = last_error


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # a bool is no int in SGLang's schema


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def every(value: Any, check) -> bool:
    """Whether `value` is a list whose every item passes `check`."""
    return isinstance(value, list) and all(check(v) for v in value)


KIND_CHECKS = {
    "int": _is_int,
    "uint": lambda v: _is_int(v) and v >= 0,
    "float": _is_number,
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "any": lambda v: True,
    "dict": lambda v: isinstance(v, dict),
    "str_list": lambda v: every(v, lambda x: isinstance(x, str)),
    "int_list": lambda v: every(v, _is_int),
    "str_or_str_list": lambda v: isinstance(v, str) or every(v, lambda x: isinstance(x, str)),
    "bool_or_bool_list": lambda v: isinstance(v, bool) or every(v, lambda x: isinstance(x, bool)),
    "int_or_int_list": lambda v: _is_int(v) or every(v, _is_int),
    "float_dict": lambda v: isinstance(v, dict) and all(_is_number(x) for x in v.values()),
    "str_dict": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
}


def type_problem(where: str, value: Any, kind: str, nullable: bool = True) -> str | None:
    """SGLang's complaint about `value` for a field of `kind`, None when it fits."""
    if value is None:
        return None if nullable else f"{where}: invalid type: null, expected {kind.replace('_', ' ')}"
    if KIND_CHECKS[kind](value):
        return None
    return f"{where}: invalid type: {type(value).__name__} {value!r}, expected {kind.replace('_', ' ')}"


def request_field_problem(body: Mapping[str, Any]) -> str | None:
    """The first top-level field of a /generate body whose type SGLang's request schema refuses."""
    for key, kind in REQUEST_FIELD_KINDS.items():
        if key in body:
            problem = type_problem(key, body[key], kind, nullable=key not in REQUEST_FIELDS_NOT_NULL)
            if problem:
                return problem
    return None


def _range_problem(p: Mapping[str, Any]) -> str | None:
    """The first of SamplingParams.verify()'s range checks that `p` fails, as SGLang words it."""
    t = p.get("temperature")
    if t is not None and (not math.isfinite(t) or t < 0.0):
        return f"temperature must be a non-negative finite number, got {t}."
    top_p = p.get("top_p")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        return f"top_p must be in (0, 1], got {top_p}."
    min_p = p.get("min_p")
    if min_p is not None and not 0.0 <= min_p <= 1.0:
        return f"min_p must be in [0, 1], got {min_p}."
    top_k = p.get("top_k")
    if top_k is not None and top_k != -1 and top_k < 1:
        return f"top_k must be -1 (disable) or at least 1, got {top_k}."
    for key in ("frequency_penalty", "presence_penalty"):
        v = p.get(key)
        if v is not None and not -2.0 <= v <= 2.0:
            return f"{key} must be in [-2, 2], got {v}."
    rp = p.get("repetition_penalty")
    if rp is not None and not 0.0 < rp <= 2.0:
        return f"repetition_penalty must be in (0, 2] (1.0 = no penalty), got {rp}."
    min_new = p.get("min_new_tokens") or 0
    if min_new < 0:
        return f"min_new_tokens must be in [0, max_new_tokens], got {min_new}."
    max_new = p.get("max_new_tokens", SAMPLING_PARAM_DEFAULTS["max_new_tokens"])
    if max_new is not None:
        if max_new < 0:
            return f"max_new_tokens must be at least 0, got {max_new}."
        if min_new > max_new:
            return f"min_new_tokens must be in [0, max_new_tokens({max_new})], got {min_new}."
    if sum(p.get(k) is not None for k in ("json_schema", "regex", "ebnf")) > 1:
        return "Only one of regex, json_schema, or ebnf can be set."
    return None


def validate_sampling_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Check `params` as SGLang's /generate would and return a copy to send.

    Raises InvalidSamplingParams (shape "schema" or "value") with SGLang's wording, so a bad
    manifest fails before any GPU time is spent.
    """
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise InvalidSamplingParams(f"sampling_params: invalid type: {type(params).__name__}, expected an object",
                                    "schema")
    unknown = sorted(k for k in params if k not in SAMPLING_PARAM_KINDS)
    if unknown:
        expected = ", ".join(f"`{k}`" for k in SAMPLING_PARAM_KINDS)
        raise InvalidSamplingParams(f"unknown field `{unknown[0]}`, expected one of {expected}", "schema")
    for key, value in params.items():
        problem = type_problem(f"sampling_params.{key}", value, SAMPLING_PARAM_KINDS[key])
        if problem:
            raise InvalidSamplingParams(problem, "schema")
    problem = _range_problem(params)
    if problem:
        raise InvalidSamplingParams(problem, "value")
    return dict(params)



def error_body(message: str, shape: str, status: int = 400) -> dict[str, Any]:
    """The body SGLang 0.5.23 answers a refused request with (docs/sglang.md#errors): its request
    schema's refusal (unknown key, wrong type) as {"error": str}; a value out of range or a prompt
    with no room as {"error": {"message": str}}; a body the HTTP layer cannot read, and a 503 or 500,
    as an OpenAI-style error object."""
    if shape == "schema":
        return {"error": message}
    if shape == "value":
        return {"error": {"message": message}}
    # `type`: FastAPI's validation handler writes the status phrase, the HTTPException handler the
    # status number (srt/entrypoints/http_server.py, both `validation_exception_handler`).
    return {"object": "error", "message": message, "type": "Bad Request" if status == 400 else str(status),
            "param": None, "code": status}


# 408/429 and every 5xx (503: the queue is full) may succeed when sent again; a 4xx about the
# request itself never will.
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def is_retryable_status(status: int) -> bool:
    if isinstance(status, bool) or not isinstance(status, int):
        raise TypeError("status must be an int")
    return status in RETRYABLE_STATUSES or 500 <= status <= 599



def parse_error_message(body: Any) -> str:
    """SGLang's message from whichever error shape came back: {"error": "str"},
    {"error": {"message": ...}} or {"object": "error", "message": ...}; else the body as text."""
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8", errors="replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return body.strip() or "(empty body)"
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, str):
            return err
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(body.get("message"), str):
            return body["message"]
        if isinstance(body.get("detail"), str):
            return body["detail"]
    return str(body)


FINISH_TYPES = frozenset({"stop", "length", "abort"})


@dataclass(frozen=True)
class GenerateResult:
    output_ids: list[int]
    finish_reason: str  # "stop" | "length" | "abort"
    prompt_tokens: int
    completion_tokens: int
    rid: str
    attempts: int = 1
    # The server answered an aborted request with an error status instead of the output made so far
    # (SGLang's own aborts that carry a status code, docs/budgets.md): what it had generated is lost.
    output_lost: bool = False


def parse_generate_response(body: Any) -> GenerateResult:
    """One /generate response object as a GenerateResult; InvalidResponse if it breaks the
    contract (missing fields, unknown finish type, completion_tokens != len(output_ids))."""
    if not isinstance(body, dict):
        raise InvalidResponse(f"expected a JSON object, got {type(body).__name__}")
    output_ids = body.get("output_ids")
    meta = body.get("meta_info")
    if not isinstance(output_ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in output_ids):
        raise InvalidResponse("output_ids missing or not a list of ints")
    if not isinstance(meta, dict):
        raise InvalidResponse("meta_info missing")
    reason = meta.get("finish_reason")
    reason_type = reason.get("type") if isinstance(reason, dict) else reason
    if reason_type not in FINISH_TYPES:
        raise InvalidResponse(f"unknown finish_reason {reason!r}")
    completion = meta.get("completion_tokens", len(output_ids) if reason_type == "abort" else None)
    prompt = meta.get("prompt_tokens", 0 if reason_type == "abort" else None)
    if not isinstance(completion, int) or not isinstance(prompt, int):
        raise InvalidResponse("meta_info lacks prompt_tokens/completion_tokens")
    if completion != len(output_ids):
        raise InvalidResponse(
            f"completion_tokens ({completion}) != len(output_ids) ({len(output_ids)}): output_ids are not the "
            "response tokens (a known 0.5.x bug put part of the prompt there)"
        )
    return GenerateResult(
        output_ids=output_ids,
        finish_reason=reason_type,
        prompt_tokens=prompt,
        completion_tokens=completion,
        rid=str(meta.get("id", "")),
    )


def aborted_result(rid: str, attempts: int, message: str, output_lost: bool = False) -> GenerateResult:
    """The result of a generate the caller aborted when the server gave no abort response."""
    return GenerateResult(
        output_ids=[], finish_reason="abort", prompt_tokens=0, completion_tokens=0, rid=rid, attempts=attempts,
        output_lost=output_lost,
    )


@dataclass(frozen=True)
class ModelInfo:
    model_id: str
    max_model_len: int | None


def parse_models_response(body: Any) -> ModelInfo:
    """The first model card of /v1/models."""
    try:
        card = body["data"][0]
        return ModelInfo(model_id=str(card["id"]), max_model_len=card.get("max_model_len"))
    except (KeyError, IndexError, TypeError) as exc:
        raise InvalidResponse(f"unexpected /v1/models body: {body!r}") from exc



def decode_json(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except ValueError as exc:
        raise InvalidResponse(f"not JSON: {payload[:200]!r}") from exc
