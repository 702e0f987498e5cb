"""The scheduler on a hand-driven clock: rates, the queue, aborts by prefix, disconnects at the poll."""

from __future__ import annotations

import pytest

from draftgen_simulator.admission import Item
from draftgen_simulator.config import SimConfig
from draftgen_simulator.scheduler import Scheduler


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def item(rid: str, tokens: int = 100) -> Item:
    return Item(rid, [1, 2, 3], tokens, {"type": "stop", "matched": 2}, token_key=7)


def scheduler(**fields) -> tuple[Scheduler, Clock]:
    clock = Clock()
    return Scheduler(SimConfig(**{"per_request_tps": 10.0, "capacity_tps": 1000.0, "disconnect_poll_s": 4.0,
                                  **fields}), clock), clock


def step(s: Scheduler, clock: Clock, seconds: float) -> None:
    clock.now += seconds
    s.tick(clock.now, seconds)


def test_each_request_runs_at_its_own_rate_until_the_capacity_is_shared():
    s, clock = scheduler(capacity_tps=30.0)
    reqs = s.submit([item(f"r{i}") for i in range(2)], lambda: False, stream=False)
    step(s, clock, 1.0)
    assert [r.emitted for r in reqs] == [10, 10]  # 2 x 10 tok/s fits in 30
    s.submit([item(f"q{i}") for i in range(4)], lambda: False, stream=False)
    step(s, clock, 1.0)
    assert [r.emitted for r in reqs] == [15, 15]  # 6 running share 30 tok/s


def test_a_request_finishes_with_its_planned_tokens_and_stop():
    s, clock = scheduler()
    [req] = s.submit([item("r", tokens=5)], lambda: False, stream=False)
    step(s, clock, 1.0)
    assert req.done.is_set() and req.response["meta_info"]["completion_tokens"] == 5
    assert req.response["output_ids"][-1] == 2 and req.response["meta_info"]["finish_reason"]["type"] == "stop"
    assert s.stats().completed == 1 and not s.live


def test_requests_over_max_running_wait_in_the_queue():
    s, clock = scheduler(max_running_requests=1)
    first, second = s.submit([item("a"), item("b")], lambda: False, stream=False)
    step(s, clock, 1.0)
    assert (first.emitted, second.emitted, s.stats().queued) == (10, 0, 1)


@pytest.mark.parametrize("given, abort_all, aborted", [
    ("job1", False, {"job1", "job10"}),  # SGLang matches by prefix
    ("job10", False, {"job10"}),
    ("jo", False, set()),  # a rid nobody holds exactly is never forwarded
    (None, True, {"job1", "job10", "other"}),
])
def test_abort_matches_rids_by_prefix(given, abort_all, aborted):
    s, clock = scheduler()
    reqs = s.submit([item("job1"), item("job10"), item("other")], lambda: False, stream=False)
    step(s, clock, 0.5)
    s.abort(given, abort_all)
    step(s, clock, 0.5)
    assert {r.rid for r in reqs if r.response and r.response["meta_info"]["finish_reason"]["type"] == "abort"} == aborted


def test_a_disconnect_is_noticed_at_the_next_poll_and_its_tokens_count_as_waste():
    s, clock = scheduler(disconnect_poll_s=4.0)
    gone = {"yes": False}
    [req] = s.submit([item("r", tokens=1000)], lambda: gone["yes"], stream=False)
    step(s, clock, 1.0)
    gone["yes"] = True
    step(s, clock, 2.0)
    assert not req.done.is_set()  # not polled yet
    step(s, clock, 1.5)
    assert req.done.is_set() and req.response["meta_info"]["finish_reason"]["type"] == "abort"
    stats = s.stats()
    assert stats.tokens_generated_after_abort > 0 and stats.tokens_generated_by_aborted == req.emitted


def test_a_queued_request_aborted_answers_from_the_waiting_queue():
    s, clock = scheduler(max_running_requests=1)
    _, queued = s.submit([item("a"), item("b")], lambda: False, stream=False)
    s.abort("b", False)
    step(s, clock, 0.1)
    assert queued.response["meta_info"]["finish_reason"]["message"] == "Abort in waiting queue"
    assert queued.response["output_ids"] == []


def test_tokens_are_charged_to_the_requests_label_kept_or_aborted():
    s, clock = scheduler()
    labelled = Item("a", [1], 100, {"type": "stop", "matched": 2}, token_key=7, label="code")
    kept = Item("b", [1], 5, {"type": "stop", "matched": 2}, token_key=7, label="chat")
    s.submit([labelled, kept], lambda: False, stream=False)
    step(s, clock, 1.0)
    s.abort("a", False)
    step(s, clock, 0.1)
    stats = s.stats()
    assert stats.tokens_by_label == {"code": 10, "chat": 5}  # the abort lands before the next tick advances
    assert stats.aborted_tokens_by_label == {"code": 10}
