"""Client for SGLang's native HTTP API (`/generate`, `/abort_request`, readiness, model info).

What it relies on (REFERENCE.md; sgl-project/sglang `srt/entrypoints/http_server.py`,
`srt/sampling/sampling_params.py`):

- `/generate` answers 400 for a bad request in one of three body shapes, and 503 when its queue is
  full; 5xx, 503 and transport failures are worth retrying, a 400 never is.
- `/abort_request` matches rids by *prefix*, so every rid this module makes has the same length.
- `completion_tokens == len(output_ids)`; a response that breaks it is rejected (a 0.5.x bug put
  part of the prompt into `output_ids`).

Transport: aiohttp, not httpx. At 150 concurrent requests httpx 0.28's pool spent ~23 ms of CPU
per request scanning its idle connections (3.4 s of CPU for 150 requests on keep-alive
connections, against 0.02 s for aiohttp, measured here; encode/httpx#3215), which would make a
benchmark measure httpx.

Cancellation: if the asyncio Task awaiting `SGLangClient.generate` is cancelled, aiohttp closes the
connection (nothing leaks from the pool), but the server keeps generating until it notices the
disconnect (~4 s). The *caller* must then `await client.abort(rid)` with the rid it passed in;
`abort` also covers the retry rid the client may have switched to.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import aiohttp

# --------------------------------------------------------------------------------------------
# sampling_params: the one list of keys and types (the simulator imports it)
# --------------------------------------------------------------------------------------------

# Every API key of SGLang's `SamplingParams` and the JSON type it takes. `None` is accepted for
# every key: SamplingParams.__post_init__ turns null into the default.
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
    "custom_params": "dict",
    "stream_interval": "int",
    "logit_bias": "dict",
    "sampling_seed": "int",
}

# SGLang's defaults for the keys that change what comes back (REFERENCE.md).
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


class InvalidSamplingParams(BadRequest):
    """A sampling_params problem. `kind` says which of SGLang's checks it fails, because each
    answers in its own error shape: "unknown_key", "type" or "value"."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


class InvalidResponse(SGLangError):
    """A 200 response that breaks the contract (e.g. completion_tokens != len(output_ids))."""


class ServerNotReady(SGLangError):
    """The server did not become ready within the startup timeout."""


class RequestFailed(SGLangError):
    """Retries ran out on retryable failures; `last_error` is the final one."""

    def __init__(self, message: str, attempts: int, last_error: BaseException | int | None):
        super().__init__(message)
        self.attempts = attempts
        self.last_error = last_error


def _is_kind(value: Any, kind: str) -> bool:
    # bool is an int subclass in Python but not in SGLang's schema.
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "str_or_str_list":
        return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
    if kind == "int_list":
        return isinstance(value, list) and all(_is_kind(v, "int") for v in value)
    if kind == "dict":
        return isinstance(value, dict)
    raise ValueError(f"unknown kind {kind!r}")


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

    Raises InvalidSamplingParams (kind "unknown_key", "type" or "value") with SGLang's wording, so
    a bad manifest fails before any GPU time is spent.
    """
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise InvalidSamplingParams(f"sampling_params must be an object, got {type(params).__name__}", "type")
    unknown = sorted(k for k in params if k not in SAMPLING_PARAM_KINDS)
    if unknown:
        # SamplingParams(**params) fails like this on the server.
        raise InvalidSamplingParams(
            f"SamplingParams.__init__() got an unexpected keyword argument '{unknown[0]}'", "unknown_key"
        )
    for key, value in params.items():
        kind = SAMPLING_PARAM_KINDS[key]
        if value is not None and not _is_kind(value, kind):
            raise InvalidSamplingParams(
                f"sampling_params.{key}: expected {kind.replace('_', ' ')}, got {type(value).__name__} {value!r}",
                "type",
            )
    problem = _range_problem(params)
    if problem:
        raise InvalidSamplingParams(problem, "value")
    return dict(params)


# --------------------------------------------------------------------------------------------
# rids
# --------------------------------------------------------------------------------------------

RID_PREFIX = "dg-"
RID_HEX_CHARS = 29  # 3 + 29 = 32 characters, like a uuid4 hex


def make_rid(run_id: str, sample_id: str, attempt: int) -> str:
    """A rid that is the same length as every other rid made here, so that none is a prefix of
    another (SGLang's /abort_request aborts every rid that *starts with* the one given)."""
    digest = hashlib.sha256(f"{run_id}\x00{sample_id}\x00{attempt}".encode()).hexdigest()
    return RID_PREFIX + digest[:RID_HEX_CHARS]


def retry_rid(rid: str, retry: int) -> str:
    """The rid of the `retry`-th resend of `rid`: fresh, because the server may still hold the old
    one (a duplicate running rid is a 400), and as long as make_rid's."""
    digest = hashlib.sha256(f"{rid}\x00retry\x00{retry}".encode()).hexdigest()
    return RID_PREFIX + digest[:RID_HEX_CHARS]


# --------------------------------------------------------------------------------------------
# decisions: retry and backoff
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """Capped exponential backoff with full jitter, bounded by attempts and optionally by the
    total time of one generate call (its generation time included, so a bound shorter than a
    long response would forbid retrying it: off by default)."""

    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    max_elapsed_s: float | None = None
    seed: int | None = None


RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})

# Failures of the connection rather than answers: refused, reset, closed mid-body, timed out.
TRANSPORT_ERRORS = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, asyncio.TimeoutError)


def is_retryable(status_or_exception: int | BaseException) -> bool:
    """Whether a failed /generate may be sent again: transport failures, timeouts, 408/429 and
    5xx. Never a 4xx answer about the request itself, nor a contract-breaking 200."""
    if isinstance(status_or_exception, bool):
        raise TypeError("status must be an int")
    if isinstance(status_or_exception, int):
        return status_or_exception in RETRYABLE_STATUSES or 500 <= status_or_exception <= 599
    return isinstance(status_or_exception, TRANSPORT_ERRORS)


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Seconds to wait before retry number `attempt` (1 = first retry): uniform in
    [0, min(cap, base * 2**(attempt-1))] ("full jitter")."""
    if attempt < 1:
        raise ValueError("attempt starts at 1")
    ceiling = min(cap, base * (2.0 ** min(attempt - 1, 62)))
    return rng.uniform(0.0, ceiling)


# --------------------------------------------------------------------------------------------
# parsing
# --------------------------------------------------------------------------------------------


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


@dataclass
class GenerateResult:
    output_ids: list[int]
    finish_reason: str  # "stop" | "length" | "abort"
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    e2e_latency: float
    rid: str
    meta: dict[str, Any] = field(default_factory=dict)
    attempts: int = 1


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
        cached_tokens=int(meta.get("cached_tokens") or 0),
        e2e_latency=float(meta.get("e2e_latency") or 0.0),
        rid=str(meta.get("id", "")),
        meta=meta,
    )


def aborted_result(rid: str, attempts: int, message: str) -> GenerateResult:
    """The result of a generate the caller aborted when the server gave no abort response."""
    return GenerateResult(
        output_ids=[], finish_reason="abort", prompt_tokens=0, completion_tokens=0, cached_tokens=0,
        e2e_latency=0.0, rid=rid, meta={"finish_reason": {"type": "abort", "message": message}}, attempts=attempts,
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


# --------------------------------------------------------------------------------------------
# the client (I/O)
# --------------------------------------------------------------------------------------------


class SGLangClient:
    """One server's client. Create and use it inside a running event loop (aiohttp's session is
    opened on first use)."""

    def __init__(
        self,
        base_url: str,
        *,
        max_connections: int = 256,
        request_timeout_s: float = 3600.0,
        connect_timeout_s: float = 10.0,
        probe_timeout_s: float = 10.0,
        keepalive_s: float = 4.0,
        retry: RetryPolicy = RetryPolicy(),
    ):
        self.base_url = base_url.rstrip("/")
        self.retry = retry
        self._rng = random.Random(retry.seed)
        self._max_connections = max_connections
        self._keepalive_s = keepalive_s  # below uvicorn's 5 s keep-alive, so we never reuse a socket it is closing
        # connect=None: waiting for a pooled connection is not a server failure (callers bound
        # concurrency themselves); sock_connect bounds the TCP connect.
        self._generate_timeout = aiohttp.ClientTimeout(total=request_timeout_s, connect=None, sock_connect=connect_timeout_s)
        self._probe_timeout = aiohttp.ClientTimeout(total=probe_timeout_s, sock_connect=connect_timeout_s)
        self._session: aiohttp.ClientSession | None = None
        # rid given by the caller -> rid of the attempt now in flight (differs after a retry)
        self._current_rid: dict[str, str] = {}
        # rids the caller aborted while their generate was in flight: never resent
        self._aborted: set[str] = set()
        self._in_flight: set[str] = set()  # rids whose generate call is running

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._max_connections, keepalive_timeout=self._keepalive_s)
            self._session = aiohttp.ClientSession(self.base_url, connector=connector)
        return self._session

    async def __aenter__(self) -> "SGLangClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _request(self, method: str, path: str, timeout: aiohttp.ClientTimeout, body: Any = None) -> tuple[int, bytes]:
        async with self._http().request(method, path, json=body, timeout=timeout) as resp:
            return resp.status, await resp.read()

    # ---- readiness -------------------------------------------------------------------------

    async def wait_ready(self, startup_timeout_s: float, poll_interval_s: float = 1.0) -> None:
        """Return once the server is ready. Polls /ready (200 = ready; servers older than
        0.5.2x answer 404 there, then /health_generate is polled instead). Connection refused
        means the port is not open yet (weights still loading). Raises ServerNotReady."""
        deadline = time.monotonic() + startup_timeout_s
        path = "/ready"
        last = "no answer yet"
        while True:
            try:
                status, _ = await self._request("GET", path, self._probe_timeout)
                if status == 200:
                    return
                if status == 404 and path == "/ready":
                    path = "/health_generate"
                    continue
                last = f"{path} answered {status}"
            except TRANSPORT_ERRORS as exc:
                last = f"{path}: {type(exc).__name__}: {exc}"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServerNotReady(
                    f"SGLang at {self.base_url} not ready after {startup_timeout_s:.0f}s (last: {last})"
                )
            await asyncio.sleep(min(poll_interval_s, remaining))

    async def model_info(self) -> ModelInfo:
        status, body = await self._request("GET", "/v1/models", self._probe_timeout)
        if status != 200:
            raise SGLangError(f"/v1/models answered {status}: {parse_error_message(body)}")
        return parse_models_response(_json(body))

    # ---- generate ----------------------------------------------------------------------------

    async def generate(
        self,
        input_ids: list[int],
        sampling_params: Mapping[str, Any] | None,
        rid: str,
        **extra: Any,
    ) -> GenerateResult:
        """One non-streaming /generate, retried on retryable failures with a fresh rid each time
        (see retry_rid). `extra` goes into the request body as top-level keys. Raises BadRequest
        (InvalidSamplingParams before sending), InvalidResponse or RequestFailed. A finish_reason
        of "abort" is a result, not an error."""
        params = validate_sampling_params(sampling_params)
        policy = self.retry
        started = time.monotonic()
        attempt_rid = rid
        attempt = 0
        last_error: BaseException | int | None = None
        if rid in self._in_flight:
            raise ValueError(f"generate already running for rid {rid!r}")
        self._current_rid[rid] = rid
        self._in_flight.add(rid)
        cancelled = False
        try:
            while True:
                if rid in self._aborted:  # aborted during the backoff: do not resend
                    return aborted_result(attempt_rid, attempt, f"aborted by the caller after {last_error!r}")
                attempt += 1
                body = {"input_ids": list(input_ids), "sampling_params": params, "rid": attempt_rid, **extra}
                try:
                    status, payload = await self._request("POST", "/generate", self._generate_timeout, body)
                except TRANSPORT_ERRORS as exc:
                    last_error = exc
                    # the server may still be generating for the old rid: stop it before resending
                    await self._abort_quietly(attempt_rid)
                else:
                    if status == 200:
                        result = parse_generate_response(_json(payload))
                        result.rid = attempt_rid
                        result.attempts = attempt
                        return result
                    if rid in self._aborted:
                        # some SGLang versions answer an aborted request with a 400 or a 500
                        # instead of a 200 whose finish_reason is abort
                        return aborted_result(attempt_rid, attempt, parse_error_message(payload))
                    if not is_retryable(status):
                        raise BadRequest(parse_error_message(payload), status)
                    last_error = status
                if rid in self._aborted:
                    return aborted_result(attempt_rid, attempt, f"aborted by the caller after {last_error!r}")
                delay = backoff_delay(attempt, policy.base_delay_s, policy.max_delay_s, self._rng)
                elapsed = time.monotonic() - started
                if attempt >= policy.max_attempts or (
                    policy.max_elapsed_s is not None and elapsed + delay > policy.max_elapsed_s
                ):
                    raise RequestFailed(
                        f"/generate failed after {attempt} attempts in {elapsed:.1f}s: {last_error!r}",
                        attempt,
                        last_error,
                    )
                await asyncio.sleep(delay)
                attempt_rid = retry_rid(rid, attempt)
                self._current_rid[rid] = attempt_rid
        except asyncio.CancelledError:
            cancelled = True  # keep the rid mapping: the caller's abort(rid) needs it
            raise
        finally:
            self._in_flight.discard(rid)
            self._aborted.discard(rid)
            if not cancelled:
                self._current_rid.pop(rid, None)

    # ---- abort -------------------------------------------------------------------------------

    async def abort(self, rid: str) -> None:
        """Ask the server to abort `rid` (and the retry rid now standing in for it, if any). A
        generate still running for `rid` then returns finish_reason "abort" and is not resent."""
        if rid in self._in_flight:
            self._aborted.add(rid)  # the running generate sees it and cleans up
            current = self._current_rid.get(rid, rid)
        else:
            current = self._current_rid.pop(rid, rid)  # left behind by a cancelled generate
        for r in {rid, current}:
            await self._post_abort({"rid": r})

    async def abort_all(self) -> None:
        self._aborted.update(self._in_flight)
        for rid in [r for r in self._current_rid if r not in self._in_flight]:
            del self._current_rid[rid]
        await self._post_abort({"abort_all": True})

    async def _post_abort(self, body: dict[str, Any]) -> None:
        status, payload = await self._request("POST", "/abort_request", self._probe_timeout, body)
        if status != 200:
            raise SGLangError(f"/abort_request answered {status}: {parse_error_message(payload)}")

    async def _abort_quietly(self, rid: str) -> None:
        try:
            await self._post_abort({"rid": rid})
        except (*TRANSPORT_ERRORS, SGLangError):
            pass  # best effort: the server is unreachable or unhappy, the retry will tell


def _json(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except ValueError as exc:
        raise InvalidResponse(f"not JSON: {payload[:200]!r}") from exc
