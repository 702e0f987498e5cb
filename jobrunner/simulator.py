"""A simulator of SGLang's native HTTP server, for tests, demos and benchmarks.

It follows the contract in REFERENCE.md (sglang 0.5.x `srt/entrypoints/http_server.py`):
`POST /generate` (input_ids or text, single or batch, streaming SSE with cumulative events),
`POST /abort_request` (prefix-matching rids, `abort_all`), `GET /ready`, `/health`,
`/health_generate`, `/v1/models`, `/server_info` (and `/get_server_info`), `/get_model_info`.
sampling_params are checked by `draftgen_contracts.sglang_protocol.validate_sampling_params`, the one list of
keys and types, and errors come back in SGLang's three body shapes.

Like SGLang, the port refuses connections until "weights are loaded" (`startup_delay_s`: the socket
is bound but does not listen), then /ready and /health_generate answer 503 for `warmup_s`.

Timing: one tick loop advances every running request (no per-token work): each gets
`per_request_tps`, unless `capacity_tps` shared among the running ones is less; at most
`max_running_requests` run, the rest queue (`max_queued_requests` bounds the queue: 503 beyond).
`speedup` scales simulated time. A client that disconnects is noticed only at the next
`disconnect_poll_s` poll (SGLang polls about every 4 s for non-streaming requests); tokens made
for a request after its client left or after an abort was asked count in
`stats.tokens_generated_after_abort`.

Lengths come from `jobrunner.sim_profiles`, seeded by (seed, profile, prompt, sampling_seed): the
same prompt gives the same response on every run and every retry. A request may pick its profile
with a top-level `"sim_profile"` key (SGLang ignores unknown top-level keys).

Three ways to run it:
- in-process: `sim = Simulator(SimConfig(...)); url = await sim.start(); ...; await sim.stop()`
- in a thread (sync code, benchmarks): `url, handle = run_in_thread(SimConfig(...)); handle.stop()`
- as a process: `jobrunner simulate --port N ...` prints the URL and serves until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import dataclasses
import hashlib
import json
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from draftgen_contracts.sglang_protocol import SAMPLING_PARAM_DEFAULTS, InvalidSamplingParams, validate_sampling_params
from jobrunner.sim_profiles import LengthProfile, get_profile, seeded_rng

SIM_VERSION = "0.5.0-sim"

# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


@dataclass
class FaultRates:
    """Probability per /generate HTTP request of each injected fault (drawn from the seed and rid)."""

    http_500: float = 0.0
    http_503: float = 0.0
    reset: float = 0.0  # connection closed after the body is read, no response
    timeout: float = 0.0  # no response until the client gives up
    slow: float = 0.0  # `slow_s` extra seconds before the request is queued
    slow_s: float = 2.0


FAULT_NAMES = ("http_500", "http_503", "reset", "timeout", "slow")


def choose_fault(rates: FaultRates, u: float) -> str | None:
    """The fault for a request whose uniform draw is `u` in [0, 1): the rates are stacked
    in FAULT_NAMES order; past their sum, none."""
    edge = 0.0
    for name in FAULT_NAMES:
        edge += getattr(rates, name)
        if u < edge:
            return name
    return None


@dataclass
class SimConfig:
    seed: int = 0
    profile: str = "chat"
    capacity_tps: float = 20_000.0  # server-wide tokens/s, shared by the running requests
    per_request_tps: float = 100.0  # tokens/s of one request when capacity is not the limit
    max_running_requests: int = 256
    max_queued_requests: int | None = None  # None: unbounded queue; else 503 when full
    context_len: int = 16_384
    startup_delay_s: float = 0.0  # port refuses connections this long
    warmup_s: float = 0.0  # then /ready and /health_generate answer 503 this long
    speedup: float = 1.0  # simulated seconds per real second
    tick_s: float = 0.01
    disconnect_poll_s: float = 4.0
    # What an aborted non-streaming request answers: 200 with finish_reason abort (REFERENCE.md);
    # some SGLang versions raise instead and answer 400 {"error": {"message"}} (or a 500).
    abort_status: int = 200
    stream_interval_s: float = 0.05  # at most one SSE event per request this often (events are cumulative)
    eos_token_id: int = 2
    vocab_size: int = 32_000
    model_path: str = "draftgen/simulated-model"
    faults: FaultRates = field(default_factory=FaultRates)
    host: str = "127.0.0.1"
    port: int = 0

    def __post_init__(self) -> None:
        get_profile(self.profile)  # fail at construction on a bad profile name
        if self.capacity_tps <= 0 or self.per_request_tps <= 0 or self.speedup <= 0:
            raise ValueError("capacity_tps, per_request_tps and speedup must be > 0")
        if self.max_running_requests < 1:
            raise ValueError("max_running_requests must be >= 1")


@dataclass
class SimStats:
    requests: int = 0  # generate requests (a batch counts each item)
    completed: int = 0  # finished with stop or length
    aborted: int = 0
    rejected: int = 0  # answered 400
    tokens_generated_total: int = 0
    tokens_generated_after_abort: int = 0
    tokens_generated_by_aborted: int = 0  # all tokens of the requests that ended aborted: wasted work
    running: int = 0
    queued: int = 0
    max_running: int = 0
    faults: dict[str, int] = field(default_factory=lambda: {name: 0 for name in FAULT_NAMES})


# --------------------------------------------------------------------------------------------
# pure decisions
# --------------------------------------------------------------------------------------------


def per_request_rate(per_request_tps: float, capacity_tps: float, running: int) -> float:
    """Tokens/s each running request gets: its own speed, unless the shared capacity is less."""
    if running <= 0:
        return 0.0
    return min(per_request_tps, capacity_tps / running)


def plan_response(
    natural_len: int, max_new_tokens: int | None, room: int, ignore_eos: bool, eos_token_id: int
) -> tuple[int, dict[str, Any]]:
    """(tokens to emit, finish_reason) for a response that would naturally end after
    `natural_len` tokens (EOS included), given max_new_tokens (None: up to the context) and
    the room left in the context."""
    limit = room if max_new_tokens is None else min(max_new_tokens, room)
    if ignore_eos or natural_len > limit:
        return limit, {"type": "length", "length": limit}
    return natural_len, {"type": "stop", "matched": eos_token_id}


def response_token_ids(key: int, n: int, vocab_size: int, eos_token_id: int, ends_with_eos: bool) -> list[int]:
    """Deterministic stand-in token ids; only the last may be EOS, and only if it stops there."""
    span = max(1, vocab_size - 3)
    step = 2 * (key % 7919) + 1  # odd, so it walks the whole range
    ids = [3 + (key + i * step) % span for i in range(n)]
    ids = [t if t != eos_token_id else 3 + (t + 1 - 3) % span for t in ids]
    if ends_with_eos and n:
        ids[-1] = eos_token_id
    return ids


def fault_for(config: "SimConfig", key: str) -> str | None:
    """The fault injected into the /generate request keyed `key` (its first rid): a function of
    the seed and the rid only, so a run replays the same faults whatever the arrival order."""
    return choose_fault(config.faults, seeded_rng(config.seed, "fault", key).random())


def prefix_matches(rid: str, given: str) -> bool:
    """SGLang's scheduler aborts every request whose rid starts with the given one."""
    return rid.startswith(given)


def _ids_digest(ids: list[int]) -> str:
    return hashlib.sha256(array.array("q", ids).tobytes()).hexdigest()


def _drop_connection(request: web.Request) -> web.Response:
    """Close the connection without an answer; the response returned is never sent."""
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=500)


def _error(status: int, body: dict[str, Any]) -> web.Response:
    return web.json_response(body, status=status)


def _error_for(exc: InvalidSamplingParams) -> web.Response:
    """Each sampling_params problem in the shape SGLang answers it with (REFERENCE.md)."""
    if exc.kind == "unknown_key":
        return _error(400, {"error": exc.message})
    if exc.kind == "type":
        return _error(400, {"object": "error", "message": exc.message, "type": "Bad Request", "param": None, "code": 400})
    return _error(400, {"error": {"message": exc.message}})


# --------------------------------------------------------------------------------------------
# one request inside the scheduler
# --------------------------------------------------------------------------------------------


class _Req:
    __slots__ = (
        "rid", "prompt_tokens", "target", "finish", "token_key", "arrival", "progress", "emitted",
        "state", "abort_message", "client_gone", "http", "done", "tick_event", "next_poll", "response",
        "stream",
    )

    def __init__(self, rid: str, prompt_tokens: int, target: int, finish: dict, token_key: int,
                 http: web.Request, stream: bool, now: float, poll_s: float):
        self.rid = rid
        self.prompt_tokens = prompt_tokens
        self.target = target
        self.finish = finish
        self.token_key = token_key
        self.arrival = now
        self.progress = 0.0
        self.emitted = 0
        self.state = "queued"
        self.abort_message: str | None = None
        self.client_gone = False
        self.http = http
        self.done = asyncio.Event()
        self.tick_event = asyncio.Event() if stream else None
        self.next_poll = now + poll_s
        self.response: dict[str, Any] | None = None
        self.stream = stream

    def transport_closed(self) -> bool:
        tr = self.http.transport
        return tr is None or tr.is_closing()


# --------------------------------------------------------------------------------------------
# the server
# --------------------------------------------------------------------------------------------


async def _json_object(request: web.Request) -> dict | web.Response:
    """The request's JSON object, or the 400 SGLang answers for a body that is not one."""
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        return _error(400, {"object": "error", "message": "Request body is not valid JSON", "code": 400})
    if not isinstance(body, dict):
        return _error(400, {"object": "error", "message": "Request body must be a JSON object", "code": 400})
    return body


class Simulator:
    def __init__(self, config: SimConfig | None = None):
        self.config = config or SimConfig()
        self._stats = SimStats()
        self._live: dict[str, _Req] = {}  # rid -> request, queued or running
        self._queue: list[_Req] = []
        self._running: list[_Req] = []
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._tick_task: asyncio.Task | None = None
        self._serve_task: asyncio.Task | None = None
        self._runner: web.AppRunner | None = None
        self._sock: socket.socket | None = None
        self._ready_at: float | None = None  # monotonic time /ready turns 200
        self._counter = 0
        self.base_url = ""

    # ---- lifecycle -----------------------------------------------------------------------

    async def start(self) -> str:
        """Bind now (so the URL is known) but listen only after startup_delay_s; return the URL."""
        cfg = self.config
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((cfg.host, cfg.port))
        port = self._sock.getsockname()[1]
        self.base_url = f"http://{cfg.host}:{port}"
        app = web.Application(client_max_size=1 << 30)
        app.add_routes([
            web.post("/generate", self._handle_generate),
            web.put("/generate", self._handle_generate),
            web.post("/abort_request", self._handle_abort),
            web.get("/ready", self._handle_ready),
            web.get("/health", self._handle_health),
            web.get("/health_generate", self._handle_health),
            web.get("/v1/models", self._handle_models),
            web.get("/server_info", self._handle_server_info),
            web.get("/get_server_info", self._handle_server_info),
            web.get("/get_model_info", self._handle_model_info),
        ])
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        self._tick_task = asyncio.create_task(self._tick_loop())
        self._serve_task = asyncio.create_task(self._listen_after_delay())
        if cfg.startup_delay_s <= 0:
            await self._serve_task
        return self.base_url

    async def _listen_after_delay(self) -> None:
        await asyncio.sleep(self.config.startup_delay_s)
        assert self._runner is not None and self._sock is not None
        site = web.SockSite(self._runner, self._sock)
        await site.start()
        self._ready_at = time.monotonic() + self.config.warmup_s

    async def stop(self) -> None:
        self._stopping.set()
        for req in list(self._live.values()):
            self._finish(req, abort="Server shutting down")
        for task in (self._serve_task, self._tick_task):
            if task and not task.done():
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        if self._runner is not None:
            await self._runner.cleanup()
        if self._sock is not None:
            self._sock.close()

    @property
    def stats(self) -> SimStats:
        s = dataclasses.replace(self._stats, faults=dict(self._stats.faults))
        s.running, s.queued = len(self._running), len(self._queue)
        return s

    def _ready(self) -> bool:
        return self._ready_at is not None and time.monotonic() >= self._ready_at

    # ---- scheduler -----------------------------------------------------------------------

    async def _tick_loop(self) -> None:
        cfg = self.config
        last = time.monotonic()
        while True:
            if not self._live:
                self._wake.clear()
                await self._wake.wait()
                last = time.monotonic()
            await asyncio.sleep(cfg.tick_s)
            now = time.monotonic()
            self._tick(now, (now - last) * cfg.speedup)
            last = now

    def _tick(self, now: float, dt: float) -> None:
        cfg = self.config
        for req in list(self._live.values()):
            if req.abort_message is not None:
                self._finish(req, abort=req.abort_message)
                continue
            if not req.client_gone and req.transport_closed():
                req.client_gone = True  # from now on its tokens are waste
            if now >= req.next_poll:
                req.next_poll += cfg.disconnect_poll_s
                if req.client_gone:
                    self._finish(req, abort="The client disconnected")
        while self._queue and len(self._running) < cfg.max_running_requests:
            req = self._queue.pop(0)
            req.state = "running"
            self._running.append(req)
        self._stats.max_running = max(self._stats.max_running, len(self._running))
        rate = per_request_rate(cfg.per_request_tps, cfg.capacity_tps, len(self._running))
        for req in list(self._running):
            req.progress += rate * dt
            new_emitted = min(req.target, int(req.progress))
            delta = new_emitted - req.emitted
            if delta <= 0:
                continue
            req.emitted = new_emitted
            self._stats.tokens_generated_total += delta
            if req.client_gone:
                self._stats.tokens_generated_after_abort += delta
            if req.emitted >= req.target:
                self._finish(req)
            elif req.tick_event is not None:
                req.tick_event.set()

    def _finish(self, req: _Req, abort: str | None = None) -> None:
        if req.state == "done":
            return
        queued = req.state == "queued"
        if queued:
            self._queue.remove(req)
        else:
            self._running.remove(req)
        del self._live[req.rid]
        req.state = "done"
        if abort is None:
            self._stats.completed += 1
            req.response = self._response(req, req.emitted, req.finish)
        else:
            self._stats.aborted += 1
            self._stats.tokens_generated_by_aborted += req.emitted
            if queued:
                req.response = {
                    "text": "", "output_ids": [],
                    "meta_info": {"id": req.rid, "finish_reason": {"type": "abort", "message": "Abort in waiting queue"},
                                  "e2e_latency": time.monotonic() - req.arrival},
                }
            else:
                reason = {"type": "abort", "message": abort, "status_code": 200, "err_type": None}
                req.response = self._response(req, req.emitted, reason)
        req.done.set()
        if req.tick_event is not None:
            req.tick_event.set()

    def _response(self, req: _Req, n: int, finish: dict | None) -> dict[str, Any]:
        stops = finish is not None and finish.get("type") == "stop" and n == req.target
        ids = response_token_ids(req.token_key, n, self.config.vocab_size, self.config.eos_token_id, stops)
        return {
            "text": f"[simulated response: {n} tokens]",
            "output_ids": ids,
            "meta_info": {
                "id": req.rid,
                "finish_reason": finish,
                "prompt_tokens": req.prompt_tokens,
                "completion_tokens": n,
                "cached_tokens": 0,
                "e2e_latency": time.monotonic() - req.arrival,
            },
        }

    # ---- /generate ---------------------------------------------------------------------------

    def _fake_tokenize(self, text: str) -> list[int]:
        span = self.config.vocab_size - 3
        return [3 + b % span for b in text.encode()]

    def _normalize(self, body: dict[str, Any]) -> tuple[list[list[int]], list[dict], list[str], bool] | web.Response:
        """The batch items of a /generate body, or the 400 SGLang would answer."""
        if body.get("input_ids") is not None:
            raw = body["input_ids"]
            is_batch = isinstance(raw, list) and bool(raw) and isinstance(raw[0], list)
            prompts = raw if is_batch else [raw]
            for p in prompts:
                if not isinstance(p, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in p):
                    return _error(400, {"object": "error", "message": "input_ids must be a list of ints or a list of lists of ints", "code": 400})
        elif body.get("text") is not None:
            raw = body["text"]
            is_batch = isinstance(raw, list)
            texts = raw if is_batch else [raw]
            if not all(isinstance(t, str) for t in texts):
                return _error(400, {"object": "error", "message": "text must be a string or a list of strings", "code": 400})
            prompts = [self._fake_tokenize(t) for t in texts]
        else:
            return _error(400, {"error": {"message": "Either text, input_ids or input_embeds should be provided."}})
        if not prompts or any(len(p) == 0 for p in prompts):
            return _error(400, {"error": {"message": "The input_ids or text must not be empty."}})
        sp = body.get("sampling_params")
        sps = sp if isinstance(sp, list) else [sp] * len(prompts)
        if len(sps) != len(prompts):
            return _error(400, {"error": {"message": "The length of sampling_params must match the batch size."}})
        rid = body.get("rid")
        if is_batch:
            if rid is None:
                rids = [self._auto_rid() for _ in prompts]
            elif isinstance(rid, list) and len(rid) == len(prompts):
                rids = rid
            else:
                return _error(400, {"error": {"message": "The rid should be a list for batch processing."}})
        else:
            rids = [rid if rid is not None else self._auto_rid()]
        if not all(isinstance(r, str) for r in rids):
            return _error(400, {"object": "error", "message": "rid must be a string", "code": 400})
        return prompts, sps, rids, is_batch

    def _auto_rid(self) -> str:
        self._counter += 1
        return f"sim-{self._counter:012d}"

    def _plan(self, prompt: list[int], params: dict[str, Any], profile: LengthProfile) -> tuple[int, dict, int] | str:
        """(tokens, finish_reason, token key) for one prompt, or SGLang's message for a too-long one."""
        cfg = self.config
        n_prompt = len(prompt)
        max_new = params.get("max_new_tokens", SAMPLING_PARAM_DEFAULTS["max_new_tokens"])
        if n_prompt >= cfg.context_len:
            return f"The input ({n_prompt} tokens) is longer than the model's context length ({cfg.context_len} tokens)."
        # `>=` as in TokenizerManager._validate_one_request: prompt + max_new_tokens must stay
        # strictly below the context length (REFERENCE.md's `>` is one token off)
        if max_new is not None and n_prompt + max_new >= cfg.context_len:
            return (
                f"Requested token count exceeds the model's maximum context length of {cfg.context_len} tokens. "
                f"You requested a total of {n_prompt + max_new} tokens: {n_prompt} tokens from the input messages "
                f"and {max_new} tokens for the completion. Please reduce the number of tokens in the input messages "
                "or the completion to fit within the limit."
            )
        digest = _ids_digest(prompt)
        rng = seeded_rng(cfg.seed, "length", profile.name, digest, params.get("sampling_seed"))
        natural = max(profile.sample(rng), params.get("min_new_tokens") or 0)
        room = cfg.context_len - 1 - n_prompt  # the scheduler's cap when max_new_tokens is null
        n, finish = plan_response(natural, max_new, room, bool(params.get("ignore_eos")), cfg.eos_token_id)
        return n, finish, rng.getrandbits(48)

    async def _handle_generate(self, request: web.Request) -> web.StreamResponse:
        cfg = self.config
        body = await _json_object(request)
        if isinstance(body, web.Response):
            return body
        normalized = self._normalize(body)
        if isinstance(normalized, web.Response):
            self._stats.rejected += 1
            return normalized
        prompts, sps, rids, is_batch = normalized
        try:
            params_list = [validate_sampling_params(sp) for sp in sps]
        except InvalidSamplingParams as exc:
            self._stats.rejected += 1
            return _error_for(exc)
        if any((p.get("n") or 1) != 1 for p in params_list):
            self._stats.rejected += 1
            return _error(400, {"error": {"message": "The simulator supports only n == 1."}})
        try:
            profile = get_profile(body.get("sim_profile") or cfg.profile)
        except ValueError as exc:
            self._stats.rejected += 1
            return _error(400, {"error": {"message": str(exc)}})
        plans = []
        for prompt, params in zip(prompts, params_list):
            plan = self._plan(prompt, params, profile)
            if isinstance(plan, str):
                self._stats.rejected += 1
                return _error(400, {"error": {"message": plan}})
            plans.append(plan)
        for rid in rids:
            if rid in self._live or rids.count(rid) > 1:
                self._stats.rejected += 1
                return _error(400, {"error": {"message": f"Duplicate request ID detected: {rid}"}})

        fault = fault_for(cfg, rids[0] if body.get("rid") is not None else f"#{self._stats.requests}")
        if fault is not None:
            self._stats.faults[fault] += 1
        if fault == "http_500":
            return _error(500, {"object": "error", "message": "Internal server error (simulated)", "code": 500})
        if fault == "http_503" or (
            cfg.max_queued_requests is not None and len(self._queue) + len(prompts) > cfg.max_queued_requests
        ):
            return _error(503, {"object": "error", "message": "The request queue is full.", "code": 503})
        if fault == "reset":
            return _drop_connection(request)
        if fault == "timeout":
            await self._hang_until_client_leaves(request)
            return _drop_connection(request)
        if fault == "slow":
            await asyncio.sleep(cfg.faults.slow_s)

        now = time.monotonic()
        stream = bool(body.get("stream"))
        reqs = []
        for rid, prompt, (n, finish, key) in zip(rids, prompts, plans):
            req = _Req(rid, len(prompt), n, finish, key, request, stream and not is_batch, now, cfg.disconnect_poll_s)
            self._live[rid] = req
            self._queue.append(req)
            reqs.append(req)
        self._stats.requests += len(reqs)
        self._wake.set()
        if stream and not is_batch:
            return await self._stream(request, reqs[0])
        for req in reqs:
            await req.done.wait()
        out = [req.response for req in reqs]
        if cfg.abort_status != 200:
            reasons = [r["meta_info"]["finish_reason"] for r in out]
            aborted = next((f for f in reasons if f.get("type") == "abort"), None)
            if aborted is not None:
                return _error(cfg.abort_status, {"error": {"message": aborted["message"]}})
        return web.json_response(out if is_batch else out[0])

    async def _hang_until_client_leaves(self, request: web.Request) -> None:
        while not self._stopping.is_set():
            tr = request.transport
            if tr is None or tr.is_closing():
                return
            try:
                await asyncio.wait_for(self._stopping.wait(), 0.2)
            except asyncio.TimeoutError:
                pass

    async def _stream(self, request: web.Request, req: _Req) -> web.StreamResponse:
        """Cumulative SSE events (SGLang's default), then `data: [DONE]`. A failed write is a
        disconnect that SGLang notices at once for streams."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        assert req.tick_event is not None
        try:
            while True:
                await req.tick_event.wait()
                req.tick_event.clear()
                if req.done.is_set():
                    event = req.response
                else:
                    event = self._response(req, req.emitted, None)
                await resp.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                if req.done.is_set():
                    break
                await asyncio.sleep(self.config.stream_interval_s)
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except (ConnectionResetError, ConnectionError):
            req.client_gone = True
            req.abort_message = "The client disconnected"
            self._wake.set()
        return resp

    # ---- /abort_request and the read-only endpoints ------------------------------------------

    async def _handle_abort(self, request: web.Request) -> web.Response:
        body = await _json_object(request)
        if isinstance(body, web.Response):
            return body
        given = body.get("rid")
        abort_all = bool(body.get("abort_all"))
        if not abort_all and given not in self._live:
            # TokenizerManager.abort_request forwards only a rid it holds exactly; the scheduler
            # then aborts every rid starting with it
            return web.Response(status=200)
        for req in self._live.values():
            if abort_all or (isinstance(given, str) and prefix_matches(req.rid, given)):
                if req.abort_message is None:
                    req.abort_message = "Aborted by AbortReq."
        self._wake.set()
        return web.Response(status=200)

    async def _handle_ready(self, request: web.Request) -> web.Response:
        if self._ready():
            return web.json_response({"status": "ready"})
        return web.Response(status=503)

    async def _handle_health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self._ready() else 503)

    async def _handle_models(self, request: web.Request) -> web.Response:
        cfg = self.config
        card = {"id": cfg.model_path, "object": "model", "created": 0, "owned_by": "sglang",
                "root": cfg.model_path, "max_model_len": cfg.context_len}
        return web.json_response({"object": "list", "data": [card]})

    async def _handle_server_info(self, request: web.Request) -> web.Response:
        cfg = self.config
        info = {
            "model_path": cfg.model_path,
            "served_model_name": cfg.model_path,
            "context_length": cfg.context_len,
            "max_running_requests": cfg.max_running_requests,
            "max_queued_requests": cfg.max_queued_requests,
            "host": cfg.host,
            "port": int(self.base_url.rsplit(":", 1)[1]),
            "version": SIM_VERSION,
            "simulator": dataclasses.asdict(cfg),
        }
        return web.json_response(info)

    async def _handle_model_info(self, request: web.Request) -> web.Response:
        cfg = self.config
        return web.json_response({
            "model_path": cfg.model_path, "tokenizer_path": cfg.model_path, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": "default",
        })


# --------------------------------------------------------------------------------------------
# running it from sync code: a thread with its own event loop
# --------------------------------------------------------------------------------------------


class SimulatorThread:
    """A Simulator on its own event loop in a daemon thread. `stats` and `stop()` are thread-safe."""

    def __init__(self, config: SimConfig):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sglang-sim", daemon=True)
        self._thread.start()
        self.simulator = Simulator(config)
        self.base_url = asyncio.run_coroutine_threadsafe(self.simulator.start(), self._loop).result()

    @property
    def stats(self) -> SimStats:
        async def snapshot() -> SimStats:
            return self.simulator.stats

        return asyncio.run_coroutine_threadsafe(snapshot(), self._loop).result()

    def stop(self) -> None:
        if not self._loop.is_running():
            return
        asyncio.run_coroutine_threadsafe(self.simulator.stop(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


def run_in_thread(config: SimConfig | None = None) -> tuple[str, SimulatorThread]:
    """Start a simulator in a background thread; returns (base_url, handle); `handle.stop()`."""
    handle = SimulatorThread(config or SimConfig())
    return handle.base_url, handle


# --------------------------------------------------------------------------------------------
# CLI: jobrunner simulate
# --------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = SimConfig()
    f = FaultRates()
    parser.add_argument("--host", default=d.host)
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--profile", default=d.profile, help="function_calling, code, math, chat, swe or fixed:N")
    parser.add_argument("--capacity-tps", type=float, default=d.capacity_tps)
    parser.add_argument("--per-request-tps", type=float, default=d.per_request_tps)
    parser.add_argument("--max-running", type=int, default=d.max_running_requests)
    parser.add_argument("--max-queued", type=int, default=None)
    # sglang.launch_server's own spellings, so the simulator drops into a generation pod's sidecar as is.
    parser.add_argument("--context-len", "--context-length", dest="context_len", type=int, default=d.context_len)
    parser.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1, help="accepted and ignored")
    parser.add_argument("--trust-remote-code", action="store_true", help="accepted and ignored")
    parser.add_argument("--startup-delay", type=float, default=d.startup_delay_s)
    parser.add_argument("--warmup", type=float, default=d.warmup_s)
    parser.add_argument("--speedup", type=float, default=d.speedup)
    parser.add_argument("--disconnect-poll", type=float, default=d.disconnect_poll_s)
    parser.add_argument("--eos-token-id", type=int, default=d.eos_token_id)
    parser.add_argument("--vocab-size", type=int, default=d.vocab_size)
    parser.add_argument("--model-path", default=d.model_path)
    for name in FAULT_NAMES:
        parser.add_argument(f"--fault-rate-{name.replace('http_', '').replace('_', '-')}", dest=f"fault_{name}",
                            type=float, default=0.0, help=f"probability of a {name} fault per request")
    parser.add_argument("--slow-s", type=float, default=f.slow_s)
    parser.add_argument("--abort-status", type=int, default=d.abort_status,
                        help="HTTP status of an aborted request: 200 (finish_reason abort), or 400/500 like some versions")


def config_from_args(args: argparse.Namespace) -> SimConfig:
    faults = FaultRates(**{name: getattr(args, f"fault_{name}") for name in FAULT_NAMES}, slow_s=args.slow_s)
    return SimConfig(
        seed=args.seed, profile=args.profile, capacity_tps=args.capacity_tps, per_request_tps=args.per_request_tps,
        max_running_requests=args.max_running, max_queued_requests=args.max_queued, context_len=args.context_len,
        startup_delay_s=args.startup_delay, warmup_s=args.warmup, speedup=args.speedup,
        disconnect_poll_s=args.disconnect_poll, eos_token_id=args.eos_token_id, vocab_size=args.vocab_size,
        model_path=args.model_path, faults=faults, host=args.host, port=args.port, abort_status=args.abort_status,
    )


async def _serve(config: SimConfig) -> None:
    sim = Simulator(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    url = await sim.start()
    print(url, flush=True)
    await stop.wait()
    await sim.stop()


def main(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ValueError as exc:
        print(f"jobrunner simulate: {exc}")
        return 2
    asyncio.run(_serve(config))
    return 0
