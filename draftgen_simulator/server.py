"""The simulator's HTTP server: SGLang's endpoints around the scheduler, faults injected on the way.

Like SGLang, the port refuses connections until "weights are loaded" (`startup_delay_s`: the socket
is bound but does not listen), then /ready and /health_generate answer 503 for `warmup_s`
(docs/sglang.md#readiness-and-model-info).

Three ways to run it:
- in-process: `sim = Simulator(SimConfig(...)); url = await sim.start(); ...; await sim.stop()`
- in a thread (sync code, tests, benchmarks): `url, handle = run_in_thread(SimConfig(...)); handle.stop()`
- as a process: `jobrunner simulate --port N ...` prints the URL and serves until SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import threading
import time

from aiohttp import web

from draftgen_contracts import sglang_auth
from draftgen_contracts.sglang_protocol import error_body
from draftgen_simulator.admission import Admitted, Refusal, admit
from draftgen_simulator.config import SIM_VERSION, SimConfig, SimStats
from draftgen_simulator.ranks import Leader
from draftgen_simulator.responses import fault_for, metrics_text
from draftgen_simulator.scheduler import Scheduler, SimRequest


def _reply(refusal: Refusal) -> web.Response:
    return web.json_response(refusal.body, status=refusal.status)


def _drop_connection(request: web.Request) -> web.Response:
    """Close the connection without an answer; the response returned is never sent."""
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=500)


def _disconnected(request: web.Request):
    def check() -> bool:
        transport = request.transport
        return transport is None or transport.is_closing()
    return check


async def _json_object(request: web.Request) -> dict | Refusal:
    """The request's JSON object, or the 400 SGLang answers for a body that is not one."""
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        return Refusal(400, error_body("Request body is not valid JSON", "request"))
    if not isinstance(body, dict):
        return Refusal(400, error_body("Request body must be a JSON object", "request"))
    return body


class Simulator:
    def __init__(self, config: SimConfig | None = None):
        self.config = config or SimConfig()
        self.scheduler = Scheduler(self.config, time.monotonic)
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._tick_task: asyncio.Task | None = None
        self._serve_task: asyncio.Task | None = None
        self._runner: web.AppRunner | None = None
        self._sock: socket.socket | None = None
        self._ready_at: float | None = None  # monotonic time /ready turns 200
        self._counter = 0
        self.base_url = ""
        # Rank 0 of a replica across nodes: the group it serves with (None on one node).
        self.leader = Leader(self.config.nnodes, self.config.dist_init_addr, self.config.lost_rank) if self.config.nnodes > 1 else None

    @property
    def stats(self) -> SimStats:
        return self.scheduler.stats()

    # ---- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> str:
        """Bind now (so the URL is known) but listen only after startup_delay_s; return the URL."""
        cfg = self.config
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((cfg.host, cfg.port))
        self.base_url = f"http://{cfg.host}:{self._sock.getsockname()[1]}"
        self._runner = web.AppRunner(self._app(), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        if self.leader is not None:
            await self.leader.start()
        self._tick_task = asyncio.create_task(self._tick_loop())
        self._serve_task = asyncio.create_task(self._listen_after_delay())
        if cfg.startup_delay_s <= 0:
            await self._serve_task
        return self.base_url

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30, middlewares=[self._keys])
        app.add_routes([
            web.post("/generate", self._handle_generate), web.put("/generate", self._handle_generate),
            web.post("/abort_request", self._handle_abort),
            web.get("/ready", self._handle_ready),
            web.get("/health", self._handle_health), web.get("/health_generate", self._handle_health),
            web.get("/v1/models", self._handle_models),
            web.get("/server_info", self._handle_server_info), web.get("/get_server_info", self._handle_server_info),
            web.get("/model_info", self._handle_model_info), web.get("/get_model_info", self._handle_model_info),
            web.get("/metrics", self._handle_metrics), web.get("/ping", self._handle_health),
        ])
        return app

    @web.middleware
    async def _keys(self, request: web.Request, handler):
        """The keys as SGLang 0.5.23 checks them, before anything else of the request is read."""
        cfg = self.config
        if not sglang_auth.allowed(request.method, request.path, request.headers.get("Authorization"), cfg.api_key,
                                   cfg.admin_api_key):
            return web.json_response(sglang_auth.UNAUTHORIZED_BODY, status=sglang_auth.UNAUTHORIZED_STATUS,
                                     dumps=lambda o: json.dumps(o, separators=(",", ":")))  # SGLang's bytes
        return await handler(request)

    async def _listen_after_delay(self) -> None:
        await asyncio.sleep(self.config.startup_delay_s)
        assert self._runner is not None and self._sock is not None
        await web.SockSite(self._runner, self._sock).start()
        self._ready_at = time.monotonic() + self.config.warmup_s

    async def stop(self) -> None:
        self._stopping.set()
        if self.leader is not None:
            await self.leader.shutdown()
        self.scheduler.shutdown()
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

    def _ready(self) -> bool:
        return (self._ready_at is not None and time.monotonic() >= self._ready_at and not self._group_broken()
                and (self.leader is None or self.leader.formed.is_set()))

    def _group_broken(self) -> bool:
        """A rank of this replica left: nothing is made any more (ranks.py)."""
        return self.leader is not None and self.leader.lost

    async def _tick_loop(self) -> None:
        cfg = self.config
        last = time.monotonic()
        while True:
            if not self.scheduler.live:
                self._wake.clear()
                await self._wake.wait()
                last = time.monotonic()
            await asyncio.sleep(cfg.tick_s)
            now = time.monotonic()
            if not self._group_broken():
                self.scheduler.tick(now, (now - last) * cfg.speedup)
            last = now

    # ---- /generate -----------------------------------------------------------------------------

    async def _handle_generate(self, request: web.Request) -> web.StreamResponse:
        body = await _json_object(request)
        admitted = body if isinstance(body, Refusal) else admit(
            body, self.config, self.scheduler.live, self._auto_rid, self._fake_tokenize)
        if isinstance(admitted, Refusal):
            self.scheduler.counters.rejected += 1
            return _reply(admitted)
        faulted = await self._inject_fault(request, body, admitted)
        if faulted is not None:
            return faulted
        reqs = self.scheduler.submit(admitted.items, _disconnected(request), admitted.stream)
        self._wake.set()
        if admitted.stream:
            return await self._stream(request, reqs[0])
        return await self._answer(reqs, admitted.is_batch)

    async def _inject_fault(self, request: web.Request, body: dict, admitted: Admitted) -> web.Response | None:
        """The configured fault for this request (or the 503 of a full queue), None to serve it."""
        cfg = self.config
        key = admitted.items[0].rid if body.get("rid") is not None else f"#{self.scheduler.counters.requests}"
        fault = fault_for(cfg, key)
        if fault is not None:
            self.scheduler.counters.faults[fault] += 1
        if fault == "http_500":
            return _reply(Refusal(500, error_body("Internal server error (simulated)", "request", 500)))
        if fault == "http_503" or not self.scheduler.has_room_for(len(admitted.items)):
            return _reply(Refusal(503, error_body("The request queue is full.", "request", 503)))
        if fault == "reset":
            return _drop_connection(request)
        if fault == "timeout":
            await self._hang_until_client_leaves(request)
            return _drop_connection(request)
        if fault == "slow":
            await asyncio.sleep(cfg.faults.slow_s)
        return None

    async def _answer(self, reqs: list[SimRequest], is_batch: bool) -> web.Response:
        for req in reqs:
            await req.done.wait()
        out = [req.response for req in reqs]
        aborted = next((r["meta_info"]["finish_reason"] for r in out
                        if r["meta_info"]["finish_reason"].get("type") == "abort"), None)
        if aborted is not None and self.config.abort_status != 200:
            return _reply(Refusal(self.config.abort_status, error_body(aborted["message"], "value")))
        return web.json_response(out if is_batch else out[0])

    def _fake_tokenize(self, text: str) -> list[int]:
        span = self.config.vocab_size - 3
        return [3 + b % span for b in text.encode()]

    def _auto_rid(self) -> str:
        self._counter += 1
        return f"sim-{self._counter:012d}"

    async def _hang_until_client_leaves(self, request: web.Request) -> None:
        while not self._stopping.is_set() and not _disconnected(request)():
            try:
                await asyncio.wait_for(self._stopping.wait(), 0.2)
            except asyncio.TimeoutError:
                pass

    async def _stream(self, request: web.Request, req: SimRequest) -> web.StreamResponse:
        """Cumulative SSE events (SGLang's default), then `data: [DONE]` (docs/sglang.md#streaming).
        A failed write is a disconnect that SGLang notices at once for streams."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        assert req.tick_event is not None
        try:
            while True:
                await req.tick_event.wait()
                req.tick_event.clear()
                event = req.response if req.done.is_set() else self.scheduler.partial_response(req, None)
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

    # ---- /abort_request and the read-only endpoints --------------------------------------------

    async def _handle_abort(self, request: web.Request) -> web.Response:
        body = await _json_object(request)
        if isinstance(body, Refusal):
            return _reply(body)
        self.scheduler.abort(body.get("rid"), bool(body.get("abort_all")))
        self._wake.set()
        return web.Response(status=200)

    async def _handle_ready(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self._ready() else 503)

    async def _handle_health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self._ready() else 503)

    async def _handle_models(self, request: web.Request) -> web.Response:
        cfg = self.config
        card = {"id": cfg.model_path, "object": "model", "created": 0, "owned_by": "sglang",
                "root": cfg.model_path, "max_model_len": cfg.context_len}
        return web.json_response({"object": "list", "data": [card]})

    async def _handle_server_info(self, request: web.Request) -> web.Response:
        cfg = self.config
        return web.json_response({
            "model_path": cfg.model_path, "served_model_name": cfg.model_path, "context_length": None,
            "max_running_requests": cfg.max_running_requests, "max_queued_requests": cfg.max_queued_requests,
            "host": cfg.host, "port": int(self.base_url.rsplit(":", 1)[1]), "version": SIM_VERSION,
            "api_key": cfg.api_key, "admin_api_key": cfg.admin_api_key,  # in clear, as SGLang 0.5.23 answers them
            "simulator": dataclasses.asdict(cfg)})

    async def _handle_model_info(self, request: web.Request) -> web.Response:
        cfg = self.config
        return web.json_response({"model_path": cfg.model_path, "tokenizer_path": cfg.model_path,
                                  "is_generation": True, "preferred_sampling_params": None,
                                  "weight_version": "default"})

    async def _handle_metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=metrics_text(self.stats, self.config.model_path),
                            content_type="text/plain", charset="utf-8")


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
