"""The client of one SGLang server's native HTTP API: /generate, /abort_request, readiness, model info.

The wire contract lives in draftgen_contracts.sglang_protocol (docs/sglang.md); the retry rule in
jobrunner.sglang.retry; the rids in jobrunner.sglang.rids.

Transport: aiohttp, not httpx. At 150 concurrent requests httpx 0.28's pool spent ~23 ms of CPU
per request scanning its idle connections (encode/httpx#3215; `bench/client_peer.py` measures
both), which would make a benchmark measure httpx.

Cancellation: if the asyncio Task awaiting `SGLangClient.generate` is cancelled, aiohttp closes the
connection (nothing leaks from the pool), but the server keeps generating until it notices the
disconnect (~4 s, docs/sglang.md#abort-by-rid-prefix). The *caller* must then `await
client.abort(rid)` with the rid it passed in; `abort` also covers the retry rid the client may have
switched to.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import replace
from typing import Any, Mapping

import aiohttp

from draftgen_contracts import sglang_auth
from draftgen_contracts.sglang_auth import ServerKeys
from draftgen_contracts.sglang_protocol import (
    BadRequest,
    GenerateResult,
    KeysRefused,
    ModelInfo,
    RequestFailed,
    ServerNotReady,
    SGLangError,
    TokenOutsideVocabulary,
    aborted_result,
    decode_json,
    ids_outside_vocabulary,
    parse_error_message,
    parse_generate_response,
    parse_models_response,
    validate_sampling_params,
)
from jobrunner.sglang.retry import TRANSPORT_ERRORS, RetryPolicy, backoff_delay, is_retryable
from jobrunner.sglang.rids import retry_rid


# When a cut request is aborted again if its call has not ended: an abort is answered within a
# decode step or two, so by half a second it was dropped; later tries cover a slow registration.
ABORT_AGAIN_AFTER_S = (0.5, 1.0, 2.0, 4.0)


KEY_STATUSES = (401, 403)
KEYS_HINT = ("the server's keys are not the ones this client holds (a generation pod takes them from the run's "
             "Secret; a key in spec.server.args wins over it)")
KEY_CHECK_RID = "draftgen-key-check"


class SGLangClient:
    """One server's client. Create and use it inside a running event loop (aiohttp's session is
    opened on first use)."""

    def __init__(
        self,
        base_url: str,
        *,
        max_connections: int = 256,  # 0: no limit (aiohttp's TCPConnector)
        request_timeout_s: float = 3600.0,
        connect_timeout_s: float = 10.0,
        probe_timeout_s: float = 10.0,
        keepalive_s: float = 4.0,
        retry: RetryPolicy = RetryPolicy(),
        vocab_size: int | None = None,  # the model's embedding rows: prompts outside them are never sent
        keys: ServerKeys = ServerKeys(),
    ):
        self.base_url = base_url.rstrip("/")
        self.keys = keys
        # False once a server that is not draftgen's refused /abort_request to a client without its admin
        # key (check_keys): an abort then only closes the request's connection.
        self.can_abort = True
        self.vocab_size = vocab_size
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
        # rids whose generate call is running, each with the event set when its call ends
        self._in_flight: dict[str, asyncio.Event] = {}

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
        headers = sglang_auth.bearer(sglang_auth.key_for(path, self.keys.api_key, self.keys.admin_api_key))
        async with self._http().request(method, path, json=body, timeout=timeout, headers=headers) as resp:
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

    async def check_keys(self, abort_optional: bool = False) -> None:
        """Whether the server takes the keys held, before any row is sent: a normal route (the API
        key) and the admin route aborts use (the admin key; aborting a rid nobody sent is a no-op).
        Raises KeysRefused; with `abort_optional` (a server that is not draftgen's) an admin route
        refused to a client that holds no admin key turns aborts off (`can_abort`) instead: a key it
        was given and is refused stays an error."""
        for method, path, body in (("GET", "/v1/models", None), ("POST", "/abort_request", {"rid": KEY_CHECK_RID})):
            status, payload = await self._request(method, path, self._probe_timeout, body)
            if status not in KEY_STATUSES:
                continue
            if path == "/abort_request" and abort_optional and not self.keys.admin_api_key:
                self.can_abort = False
                continue
            raise KeysRefused(f"{path} answered {status} {parse_error_message(payload)}: {KEYS_HINT}")

    async def model_info(self) -> ModelInfo:
        status, body = await self._request("GET", "/v1/models", self._probe_timeout)
        if status != 200:
            raise SGLangError(f"/v1/models answered {status}: {parse_error_message(body)}")
        return parse_models_response(decode_json(body))

    async def server_info(self) -> dict:
        """The server's version and args: GET /server_info (SGLang's `get_server_info` handler answers it
        and, on servers before its rename, /get_server_info: sgl-project/sglang
        python/sglang/srt/entrypoints/http_server.py)."""
        for path in ("/server_info", "/get_server_info"):
            status, body = await self._request("GET", path, self._probe_timeout)
            if status == 200:
                info = decode_json(body)
                if isinstance(info, dict):
                    return info
            elif status != 404:
                break
        raise SGLangError(f"{path} answered {status}: {parse_error_message(body)}")

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
        of "abort" is a result, not an error. A prompt with an id outside the model's vocabulary raises
        TokenOutsideVocabulary unsent: one such id kills the real server."""
        params = validate_sampling_params(sampling_params)
        if self.vocab_size is not None and (outside := ids_outside_vocabulary(input_ids, self.vocab_size)):
            raise TokenOutsideVocabulary(f"token id {outside[0]} is outside the model's vocabulary of "
                                         f"{self.vocab_size}; not sent")
        if rid in self._in_flight:
            raise ValueError(f"generate already running for rid {rid!r}")
        self._current_rid[rid] = rid
        ended = self._in_flight[rid] = asyncio.Event()
        cancelled = False
        try:
            return await self._attempts({"input_ids": list(input_ids), "sampling_params": params, **extra}, rid)
        except asyncio.CancelledError:
            cancelled = True  # keep the rid mapping: the caller's abort(rid) needs it
            raise
        finally:
            del self._in_flight[rid]
            self._aborted.discard(rid)
            ended.set()
            if not cancelled:
                self._current_rid.pop(rid, None)

    async def _attempts(self, body: dict[str, Any], rid: str) -> GenerateResult:
        """Send until an answer, a refusal, the caller's abort or the retry policy's end."""
        started = time.monotonic()
        attempt_rid = rid
        last_error: BaseException | int | None = None
        for attempt in itertools.count(1):
            if rid in self._aborted:  # aborted during the backoff: do not resend
                return aborted_result(attempt_rid, attempt - 1, f"aborted by the caller after {last_error!r}")
            outcome = await self._attempt({**body, "rid": attempt_rid}, rid)
            if isinstance(outcome, GenerateResult):
                return replace(outcome, attempts=attempt)
            last_error = outcome
            if rid in self._aborted:
                return aborted_result(attempt_rid, attempt, f"aborted by the caller after {last_error!r}")
            await self._back_off(attempt, started, last_error)
            attempt_rid = retry_rid(rid, attempt)
            self._current_rid[rid] = attempt_rid
        raise AssertionError("unreachable")

    async def _attempt(self, body: dict[str, Any], rid: str) -> GenerateResult | BaseException | int:
        """One POST: its result, or the retryable failure (a transport error or a status)."""
        attempt_rid = body["rid"]
        try:
            status, payload = await self._request("POST", "/generate", self._generate_timeout, body)
        except TRANSPORT_ERRORS as exc:
            await self._abort_quietly(attempt_rid)  # the server may still be generating for it
            return exc
        if status in KEY_STATUSES:
            raise KeysRefused(f"/generate answered {status} {parse_error_message(payload)}: {KEYS_HINT}")
        if status == 200:
            return replace(parse_generate_response(decode_json(payload)), rid=attempt_rid)
        if rid in self._aborted:
            # an abort SGLang made itself with a status code (0.5.23: 503 for a request retracted
            # without a KV backup, 500 out of memory; docs/budgets.md) answers with that status,
            # not a 200 whose finish_reason is abort, even when draftgen was cutting it too
            return aborted_result(attempt_rid, 0, parse_error_message(payload), output_lost=True)
        if not is_retryable(status):
            raise BadRequest(parse_error_message(payload), status)
        return status

    async def _back_off(self, attempt: int, started: float, last_error: BaseException | int) -> None:
        """Wait before the next attempt, or raise RequestFailed when the policy allows none."""
        policy = self.retry
        delay = backoff_delay(attempt, policy.base_delay_s, policy.max_delay_s, self._rng)
        elapsed = time.monotonic() - started
        if attempt >= policy.max_attempts or (
            policy.max_elapsed_s is not None and elapsed + delay > policy.max_elapsed_s
        ):
            raise RequestFailed(f"/generate failed after {attempt} attempts in {elapsed:.1f}s: {last_error!r}",
                                attempt, last_error)
        await asyncio.sleep(delay)

    # ---- abort -------------------------------------------------------------------------------

    async def abort(self, rid: str) -> None:
        """Ask the server to abort `rid` (and the retry rid now standing in for it, if any). A
        generate still running for `rid` then returns finish_reason "abort" and is not resent."""
        if rid in self._in_flight:
            self._aborted.add(rid)  # the running generate sees it and cleans up
            current = self._current_rid.get(rid, rid)
        else:
            current = self._current_rid.pop(rid, rid)  # left behind by a cancelled generate
        if not self.can_abort:
            return  # the caller's cancel closed its connection: SGLang aborts it within ~4 s (docs/sglang.md)
        for r in {rid, current}:
            await self._post_abort({"rid": r})

    async def abort_until_answered(self, rid: str, again_after_s: tuple[float, ...] = ABORT_AGAIN_AFTER_S) -> None:
        """`abort(rid)`, sent again while its generate is still running after each delay. SGLang
        0.5.23 drops an abort that reaches its tokenizer manager before the rid is registered, and
        answers 200 all the same (`TokenizerManager.abort_request`,
        python/sglang/srt/managers/tokenizer_manager.py, with one tokenizer worker); a second abort
        of a registered rid is a no-op there (`state.abort_sent`), so repeating one costs nothing."""
        ended = self._in_flight.get(rid)
        await self.abort(rid)
        for delay in again_after_s:
            if ended is None:
                return
            try:
                await asyncio.wait_for(ended.wait(), delay)
                return
            except asyncio.TimeoutError:
                await self.abort(rid)

    async def _post_abort(self, body: dict[str, Any]) -> None:
        status, payload = await self._request("POST", "/abort_request", self._probe_timeout, body)
        if status != 200:
            raise SGLangError(f"/abort_request answered {status}: {parse_error_message(payload)}")

    async def _abort_quietly(self, rid: str) -> None:
        if not self.can_abort:
            return
        try:
            await self._post_abort({"rid": rid})
        except (*TRANSPORT_ERRORS, SGLangError):
            pass  # best effort: the server is unreachable or unhappy, the retry will tell
