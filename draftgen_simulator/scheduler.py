"""The simulated scheduler: requests queue, run at a shared rate, finish or are aborted.

No I/O and no clock of its own: `tick(now, dt)` advances every running request by `dt` simulated
seconds (one tick loop, no per-token work), so tests drive it with any clock. A request's client
connection is seen only through `disconnected()`, and a disconnect is noticed at the next poll
(docs/sglang.md#client-disconnects), as SGLang does.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from draftgen_simulator.admission import Item
from draftgen_simulator.config import SimConfig, SimStats
from draftgen_simulator.responses import (
    per_request_rate,
    prefix_matches,
    queued_abort_body,
    response_body,
    response_token_ids,
)


class SimRequest:
    """One admitted prompt inside the scheduler."""

    __slots__ = ("item", "arrival", "progress", "emitted", "state", "abort_message", "client_gone",
                 "disconnected", "done", "tick_event", "next_poll", "response")

    def __init__(self, item: Item, disconnected: Callable[[], bool], stream: bool, now: float, poll_s: float):
        self.item = item
        self.arrival = now
        self.progress = 0.0
        self.emitted = 0
        self.state = "queued"
        self.abort_message: str | None = None
        self.client_gone = False
        self.disconnected = disconnected
        self.done = asyncio.Event()
        self.tick_event = asyncio.Event() if stream else None
        self.next_poll = now + poll_s
        self.response: dict[str, Any] | None = None

    @property
    def rid(self) -> str:
        return self.item.rid


class Scheduler:
    def __init__(self, config: SimConfig, clock: Callable[[], float]):
        self.config = config
        self.clock = clock
        self.counters = SimStats()
        self.live: dict[str, SimRequest] = {}  # rid -> request, queued or running
        self.queue: list[SimRequest] = []
        self.running: list[SimRequest] = []

    def stats(self) -> SimStats:
        c = self.counters
        s = dataclasses.replace(c, faults=dict(c.faults), tokens_by_label=dict(c.tokens_by_label),
                                aborted_tokens_by_label=dict(c.aborted_tokens_by_label))
        s.running, s.queued = len(self.running), len(self.queue)
        return s

    def has_room_for(self, n: int) -> bool:
        """Whether n more requests fit the queue (`max_queued_requests`: 503 beyond)."""
        limit = self.config.max_queued_requests
        return limit is None or len(self.queue) + n <= limit

    def submit(self, items: list[Item], disconnected: Callable[[], bool], stream: bool) -> list[SimRequest]:
        now = self.clock()
        reqs = [SimRequest(item, disconnected, stream, now, self.config.disconnect_poll_s) for item in items]
        for req in reqs:
            self.live[req.rid] = req
            self.queue.append(req)
        self.counters.requests += len(reqs)
        self.counters.prompt_tokens_total += sum(len(item.prompt) for item in items)
        return reqs

    def abort(self, given: Any, abort_all: bool) -> None:
        """/abort_request: every live rid starting with `given` (or all) is aborted at the next tick.
        SGLang's tokenizer manager forwards only a rid it holds exactly; its scheduler then matches
        by prefix (docs/sglang.md#abort-by-rid-prefix)."""
        if not abort_all and given not in self.live:
            return
        for req in self.live.values():
            if (abort_all or prefix_matches(req.rid, given)) and req.abort_message is None:
                req.abort_message = "Aborted"

    def tick(self, now: float, dt: float) -> None:
        self._notice_aborts_and_disconnects(now)
        self._admit_from_queue()
        self._advance(dt)

    def _notice_aborts_and_disconnects(self, now: float) -> None:
        for req in list(self.live.values()):
            if req.abort_message is not None:
                self.finish(req, abort=req.abort_message)
                continue
            if not req.client_gone and req.disconnected():
                req.client_gone = True  # from now on its tokens are waste
            if now >= req.next_poll:
                req.next_poll += self.config.disconnect_poll_s
                if req.client_gone:
                    self.finish(req, abort="The client disconnected")

    def _admit_from_queue(self) -> None:
        while self.queue and len(self.running) < self.config.max_running_requests:
            req = self.queue.pop(0)
            req.state = "running"
            self.running.append(req)
        self.counters.max_running = max(self.counters.max_running, len(self.running))

    def _advance(self, dt: float) -> None:
        cfg = self.config
        rate = per_request_rate(cfg.per_request_tps, cfg.capacity_tps, len(self.running))
        for req in list(self.running):
            req.progress += rate * dt
            emitted = min(req.item.tokens, int(req.progress))
            delta = emitted - req.emitted
            if delta <= 0:
                continue
            req.emitted = emitted
            self.counters.tokens_generated_total += delta
            if req.item.label:
                by_label = self.counters.tokens_by_label
                by_label[req.item.label] = by_label.get(req.item.label, 0) + delta
            if req.client_gone:
                self.counters.tokens_generated_after_abort += delta
            if req.emitted >= req.item.tokens:
                self.finish(req)
            elif req.tick_event is not None:
                req.tick_event.set()

    def finish(self, req: SimRequest, abort: str | None = None) -> None:
        if req.state == "done":
            return
        queued = req.state == "queued"
        (self.queue if queued else self.running).remove(req)
        del self.live[req.rid]
        req.state = "done"
        req.response = self._final_response(req, abort, queued)
        req.done.set()
        if req.tick_event is not None:
            req.tick_event.set()

    def _final_response(self, req: SimRequest, abort: str | None, queued: bool) -> dict[str, Any]:
        if abort is None:
            self.counters.completed += 1
            return self.partial_response(req, req.item.finish)
        self.counters.aborted += 1
        self.counters.tokens_generated_by_aborted += req.emitted
        if req.item.label:
            by_label = self.counters.aborted_tokens_by_label
            by_label[req.item.label] = by_label.get(req.item.label, 0) + req.emitted
        if queued:
            return queued_abort_body(req.rid, self.clock() - req.arrival)
        return self.partial_response(req, {"type": "abort", "message": abort, "status_code": None, "err_type": None})

    def partial_response(self, req: SimRequest, finish: dict | None) -> dict[str, Any]:
        """The response as it stands: every token emitted so far (a stream event, or the final body)."""
        item, cfg = req.item, self.config
        at_eos = finish is not None and finish.get("matched") == cfg.eos_token_id and req.emitted == item.tokens
        ids = response_token_ids(item.token_key, req.emitted, cfg.vocab_size, cfg.eos_token_id, at_eos)
        return response_body(req.rid, len(item.prompt), ids, finish, self.clock() - req.arrival)

    def shutdown(self) -> None:
        for req in list(self.live.values()):
            self.finish(req, abort="Server shutting down")
