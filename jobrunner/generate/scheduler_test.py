"""The scheduler on a fake clock: datasets' budgets from the builder, prompts offered by hand, every
order what the engine would carry out."""

import pytest

from draftgen_contracts import exit_codes
from draftgen_contracts.budget_shares import Reach
from draftgen_contracts.prompt_classes import PromptClass
from draftgen_contracts.sglang_protocol import GenerateResult
from draftgen_dev.builders import dataset_budget
from jobrunner.generate.actions import (LeaveForNextRun, Order, Send, StartReading, Stop, StopCuttingAtBudget,
                                        WaitForServer)
from jobrunner.generate.dataset_budget import DatasetBudget
from jobrunner.generate.scheduler import MAX_CONSECUTIVE_FAILURES, READ_AHEAD, Scheduler, exit_code
from jobrunner.shared.prompts import Prompt

SHORT = PromptClass(name="short", concurrency=4, max_new_tokens=1000)
LONG = PromptClass(name="long", max_prompt_tokens=None, concurrency=2, max_new_tokens=1000)


def scheduler(*budgets: DatasetBudget, classes: tuple[PromptClass, ...] = (SHORT,)) -> Scheduler:
    return Scheduler(budgets, {c.name: c for c in classes}, budgets[0].clock, "run/r0/key", context_length=4096)


def budgets(*names: str, clock=None, **fields) -> list[DatasetBudget]:
    """One replica's budgets (1000 tokens each unless `budget_tokens` says), on one clock."""
    first = dataset_budget(names[0], replicas=1, replica=0, clock=clock, **fields)
    return [first, *(dataset_budget(n, replicas=1, replica=0, clock=first.clock, **fields) for n in names[1:])]


def prompt(row: int, prompt_class: str = "short", **fields) -> Prompt:
    return Prompt(row, [1, 2, 3], prompt_class, 1000, **fields)


def offer(s: Scheduler, name: str, *rows: int, prompt_class: str = "short") -> None:
    for row in rows:
        s.offer(name, prompt(row, prompt_class), 0.0)


def sends(orders: list[Order]) -> list[tuple[str, int]]:
    return [(o.dataset, o.action.prompt.row) for o in orders if isinstance(o.action, Send)]


def started(orders: list[Order]) -> list[str]:
    return [o.dataset for o in orders if isinstance(o.action, StartReading)]


@pytest.mark.parametrize("states, transient_failures, shutdown, server_lost, code", [
    ({"a": "BudgetMet", "b": "Exhausted"}, {}, False, False, exit_codes.OK),
    ({"a": "Generating"}, {"a": 3}, False, False, exit_codes.RETRY_LATER),  # rows to redo: the Job runs a new pod
    ({"a": "BudgetMet"}, {"a": 3}, False, False, exit_codes.OK),  # the failed rows are not needed
    # a's failed rows are not needed, and b used every row: nothing is left to run again for
    ({"a": "BudgetMet", "b": "Exhausted"}, {"a": 3}, False, False, exit_codes.OK),
    ({"a": "BudgetMet", "b": "Generating"}, {"b": 1}, False, False, exit_codes.RETRY_LATER),
    # SIGTERM (a drain, an eviction, a preemption) with work left is not success: the Job replaces the pod
    ({"a": "Generating"}, {}, True, False, 143),
    ({"a": "BudgetMet", "b": "Exhausted"}, {}, True, False, exit_codes.OK),  # SIGTERM once all was done
    ({"a": "Generating"}, {"a": 20}, False, True, exit_codes.RETRY_LATER),  # the server did not come back
    ({"a": "Generating"}, {"a": 20}, True, True, 143),  # SIGTERM while it was lost
])
def test_the_exit_status_says_what_the_job_should_do(states, transient_failures, shutdown, server_lost, code):
    assert exit_code(states, transient_failures, shutdown, server_lost) == code


# ---- the order of the datasets --------------------------------------------------------------------


def test_the_first_dataset_starts_alone_and_its_rows_go_in_order_within_the_class_slots():
    s = scheduler(*budgets("a", "b", cut=False, budget_tokens=100_000))
    assert started(s.schedule(0.0)) == ["a"]
    offer(s, "a", 1, 2, 3, 4, 5, 6)
    orders = s.schedule(0.0)
    # Four requests (about 2000 tokens expected) are far from a's budget: a takes every slot, so b
    # does not start; the fifth row waits for a slot.
    assert sends(orders) == [("a", 1), ("a", 2), ("a", 3), ("a", 4)] and not started(orders)
    assert s.in_flight == {"short": 4} and s.lanes["a"].head() == prompt(5)


def test_the_next_dataset_starts_when_this_one_is_out_of_rows_and_a_done_one_is_passed_over():
    done = dataset_budget("done", replicas=1, replica=0, made=1000, cut=False)
    a, b = budgets("a", "b", cut=False, clock=done.clock)
    s = scheduler(a, done, b)
    s.schedule(0.0)
    offer(s, "a", 1)
    s.rows_read("a")
    orders = s.schedule(0.0)
    assert sends(orders) == [("a", 1)] and started(orders) == ["b"]
    assert Order("done", Stop(())) in orders and done.stopped


def test_a_dataset_covered_by_its_requests_in_flight_lets_the_next_start():
    a, b = budgets("a", "b", cut=True)
    s = scheduler(a, b)
    s.schedule(0.0)
    offer(s, "a", 1, 2)
    orders = s.schedule(0.0)
    # One request is expected at ~500 of a's 1000: past its share while b would take the slots.
    assert sends(orders) == [("a", 1)] and started(orders) == ["b"]
    assert s.reach(s.lanes["a"], 0.0) == Reach.INTERLEAVED and a.is_covered(0.0, Reach.INTERLEAVED)


def test_a_dataset_waiting_for_a_full_class_lets_the_next_start_on_the_free_one():
    a, b = budgets("a", "b", cut=False)
    s = scheduler(a, b, classes=(SHORT, LONG))
    s.schedule(0.0)
    offer(s, "a", 1, 2, prompt_class="long")
    offer(s, "a", 3, prompt_class="long")
    orders = s.schedule(0.0)
    assert sends(orders) == [("a", 1), ("a", 2)] and s.holds_up(s.lanes["a"]) and started(orders) == ["b"]


# ---- the reach ------------------------------------------------------------------------------------


def test_a_dataset_keeps_a_share_of_what_is_left_in_flight_while_another_would_take_the_slots():
    a, other = budgets("a", "other", cut=True)  # 1000 to make each, expected 500 a response
    s = scheduler(a, other)
    lane = s.lanes["a"]
    a.start(0.0)
    assert s.reach(lane, 0.0) == Reach.INTERLEAVED and a.may_send(0.0, s.reach(lane, 0.0))
    a.sent(prompt(1), "r1", now=0.0)  # 500 expected in flight: past a quarter of 1000
    lane.classes_sent.add("short")
    assert not a.may_send(0.0, s.reach(lane, 0.0)) and s.lets_the_next_start(lane, 0.0)
    other.start(0.0)
    other.sent(prompt(1), "o1", now=0.0)  # the other dataset is covered within its share too ...
    s.lanes["other"].classes_sent.add("short")
    assert s.reach(lane, 0.0) == Reach.HOLDING and a.may_send(0.0, Reach.HOLDING)  # ... so the slots are a's, to 1000
    a.sent(prompt(2), "r2", now=0.0)
    assert not a.may_send(0.0, s.reach(lane, 0.0))
    other.stop()  # nothing else takes a slot: this one fills to the cut
    assert s.reach(lane, 0.0) == Reach.FILLING and a.may_send(0.0, Reach.FILLING)


def test_a_dataset_alone_fills_its_slots():
    a = dataset_budget("a", replicas=1, replica=0, cut=True)
    s = scheduler(a)
    a.start(0.0)
    a.sent(prompt(1), "r1", now=0.0)
    a.sent(prompt(2), "r2", now=0.0)  # expected at ~1000 together: the whole budget, 256 each to make
    assert s.reach(s.lanes["a"], 0.0) == Reach.FILLING and a.may_send(0.0, Reach.FILLING)
    a2, other = budgets("a", "other", cut=True)
    s = scheduler(a2, other)
    a2.start(0.0)
    a2.sent(prompt(1), "r1", now=0.0)
    a2.sent(prompt(2), "r2", now=0.0)
    assert s.reach(s.lanes["a"], 0.0) == Reach.INTERLEAVED and a2.is_covered(0.0, Reach.INTERLEAVED)
    other.stop()  # another dataset that takes no slot leaves them to this one again
    assert s.reach(s.lanes["a"], 0.0) == Reach.FILLING


# ---- sending, again and the slots -----------------------------------------------------------------


def test_a_row_sent_again_goes_before_the_fresh_ones_under_a_fresh_rid_and_a_finished_request_frees_its_slot():
    [a] = budgets("a", cut=False, budget_tokens=100_000)
    s = scheduler(a)
    s.schedule(0.0)
    offer(s, "a", 1, 2, 3, 4, 5)
    first = {o.action.prompt.row: o.action.rid for o in s.schedule(0.0) if isinstance(o.action, Send)}
    s.lanes["a"].again.append((prompt(1), 0.5))  # as a trim's SendAgain routes it
    assert s.schedule(1.0) == [] and s.in_flight == {"short": 4}
    s.finished("a", prompt(2), first[2], 1.0)
    [again] = [o.action for o in s.schedule(1.0) if isinstance(o.action, Send)]
    assert again.prompt == prompt(1) and again.rid != first[1] and again.queued_s == 0.5


def test_the_readers_may_read_ahead_until_the_dataset_wants_no_more():
    [a] = budgets("a", cut=False)
    s = scheduler(a)
    assert s.room_for_rows("a") == READ_AHEAD
    offer(s, "a", *range(READ_AHEAD // 2 + 1))
    assert s.room_for_rows("a") == 0  # the reader waits until half of it is sent, not for each request
    s.lanes["a"].fresh.popleft()
    assert s.room_for_rows("a") == READ_AHEAD // 2
    s.shut_down()
    assert s.room_for_rows("a") is None and s.lanes["a"].head() is None  # the unsent rows are dropped


def test_one_dataset_finding_that_the_server_loses_cut_outputs_turns_cutting_off_for_all():
    a, b = budgets("a", "b", cut=True, speed=100.0)
    s = scheduler(a, b)
    orders = s._route(s.lanes["a"], [StopCuttingAtBudget()], 0.0)
    assert orders == [Order("a", StopCuttingAtBudget())] and not a.cuts_at_budget and not b.cuts_at_budget


# ---- failures and the end -------------------------------------------------------------------------


def test_twenty_failures_in_a_row_wait_for_the_server_once_and_a_server_gone_for_good_stops_the_run():
    [a] = budgets("a", cut=False)
    s = scheduler(a)
    s.schedule(0.0)
    orders = []
    for row in range(MAX_CONSECUTIVE_FAILURES + 2):
        orders += s.failed("a", row, f"r{row}", "connection refused", 0.0)
    waits = [o for o in orders if isinstance(o.action, WaitForServer)]
    assert len(waits) == 1 and waits[0].action.reason.startswith("20 requests in a row failed")
    assert len([o for o in orders if isinstance(o.action, LeaveForNextRun)]) == MAX_CONSECUTIVE_FAILURES + 2
    offer(s, "a", 1)
    assert s.schedule(0.0) == []  # nothing is sent while the server is waited for
    s.server_back()
    assert sends(s.schedule(0.0)) == [("a", 1)] and s.consecutive_failures == 0
    assert Order("a", Stop((a.requests[1].rid,))) in s.server_lost("not ready in 600 s")
    assert s.exit_status() == exit_codes.RETRY_LATER


def test_an_answer_resets_the_failures_in_a_row_but_a_trace_read_does_not():
    [a] = budgets("a", cut=False)
    s = scheduler(a)
    s.schedule(0.0)
    s.failed("a", 1, "r1", "timeout", 0.0)
    s.answered("a", prompt(2, response_ids=[5]), "r2", GenerateResult([5], "stop", 3, 1, "r2"), 0.0, 0.0)
    assert s.consecutive_failures == 1
    s.answered("a", prompt(3), "r3", GenerateResult([5], "stop", 3, 1, "r3"), 0.0, 0.0)
    assert s.consecutive_failures == 0


def test_the_run_is_over_when_every_dataset_sent_its_rows_or_stopped_and_nothing_is_in_flight():
    a, b = budgets("a", "b", cut=False)
    s = scheduler(a, b)
    s.schedule(0.0)
    offer(s, "a", 1)
    s.rows_read("a")
    rid = next(o.action.rid for o in s.schedule(0.0) if isinstance(o.action, Send))
    s.rows_read("b")
    assert not s.is_over()  # a's request is in flight
    s.finished("a", prompt(1), rid, 1.0)
    assert s.is_over() and s.progress("a", a.totals, 1.0).state == "Exhausted"
