"""A dataset's budget on a fake clock: every `now` is a number the test chooses, every action is
what the scheduler would route."""

import pytest

from draftgen_contracts.budget_shares import Reach, Spend
from draftgen_contracts.generation_record import CutAtBudget
from draftgen_contracts.sglang_protocol import GenerateResult
from draftgen_contracts.states import DatasetState
from draftgen_dev.builders import dataset_budget, dataset_progress, generation_record
from jobrunner.generate.actions import Abort, Cut, Keep, LeaveForNextRun, SendAgain, Stop, StopCuttingAtBudget, Tick
from jobrunner.generate.dataset_budget import (BudgetMode, DatasetBudget, loses_cut_outputs, peer_spend,
                                                   replica_sample_cap,
                                                   still_settled, surplus)
from jobrunner.shared.prompts import Prompt

BUDGET = 1000  # the builder's


def write(c: DatasetBudget, result: GenerateResult, row: int, cut: bool = False) -> None:
    """What the writer does to the totals the budget reads."""
    c.totals.add_record(generation_record(c.name, row, [1, 2, 3], result.output_ids, result.finish_reason,
                                          cut=CutAtBudget(result.completion_tokens) if cut else None), 0)


def prompt(row: int, **fields) -> Prompt:
    return Prompt(row, [1, 2, 3], "short", 1000, **fields)


def answer(c: DatasetBudget, p: Prompt, rid: str, result: GenerateResult, e2e_s: float, now: float) -> list:
    """The engine's path for an answer: the budget's verdict, a `Keep` written and reported back."""
    done = []
    for action in c.answered(p, rid, result, e2e_s, now):
        done.append(action)
        if isinstance(action, Keep):
            write(c, action.result, p.row, cut=action.generated is not None)
            done += c.kept(action.result, action.generated, e2e_s, now)
    return done


def cuts(actions: list) -> list:
    return [a for a in actions if isinstance(a, Cut)]


# ---- cutting at the budget ------------------------------------------------------------------------


def test_a_request_is_cut_when_the_clock_says_it_has_made_what_is_left():
    c = dataset_budget(made=400, speed=100.0)  # 100 left of this replica's 500
    c.start(1.0)
    assert c.sent(prompt(1), "r1", now=1.0) == [Tick(1.0)]  # 100 tokens at 100 tokens/s
    assert c.is_covered(1.5, Reach.FILLING)  # what is left is less than another piece
    assert c.tick(now=2.0) == [Tick(None), Cut(("r1",))]
    assert c.mode == BudgetMode.CUTTING and not c.may_send(2.0, Reach.FILLING)
    assert c.tick(now=2.5) == [Tick(None)]  # cut once: its answer is awaited


def test_a_cut_answer_is_kept_up_to_what_was_left_and_the_share_settles():
    c = dataset_budget(made=400, speed=100.0)
    c.start(1.0)
    c.sent(prompt(1), "r1", now=1.0)
    c.tick(now=2.0)
    kept = answer(c, prompt(1), "r1", GenerateResult([5] * 130, "abort", 3, 130, "r1"), e2e_s=1.0, now=2.0)
    assert kept == [Keep(GenerateResult([5] * 100, "length", 3, 100, "r1"), generated=130, estimated=100)]
    assert c.own_tokens == 500 and c.remaining(2.0) == 0
    c.finished(1, "r1", now=2.0)
    assert c.mode == BudgetMode.SETTLED and c.progress(c.totals, 2.0).settled


def test_a_cut_answer_that_keeps_nothing_writes_no_record_when_nothing_is_left():
    c = dataset_budget(made=400, speed=100.0)
    c.start(1.0)
    c.sent(prompt(1), "r1", now=1.0)
    write(c, GenerateResult([5] * 100, "stop", 3, 100, "other"), row=2)  # another response makes the share
    assert cuts(c.tick(now=1.0)) == [Cut(("r1",))]
    # Nothing is left: the row is not sent again either.
    assert answer(c, prompt(1), "r1", GenerateResult([5] * 30, "abort", 3, 30, "r1"), e2e_s=0.3, now=1.3) == []
    assert c.own_tokens == 500


def test_a_clock_running_ahead_cuts_early_and_the_empty_answer_gives_its_row_back_and_slows_the_clock():
    # The clock says 100 tokens/s, so the request "has made" the 100 left after a second; the
    # server had made nothing yet. Its row is sent again, and the corrected clock plans no cut
    # a second later as it did (a clock never corrected by empty answers cut again and again).
    c = dataset_budget(made=400, speed=100.0)
    c.start(1.0)
    c.sent(prompt(1), "r1", now=1.0)
    assert cuts(c.tick(now=2.0)) == [Cut(("r1",))]
    answered = answer(c, prompt(1), "r1", GenerateResult([], "abort", 3, 0, "r1"), e2e_s=1.0, now=2.0)
    assert answered == [SendAgain((prompt(1),))]
    c.finished(1, "r1", now=2.0)
    again = prompt(1)
    assert c.mode == BudgetMode.OPEN
    [tick] = c.sent(again, "r1-again", now=2.0)
    assert tick.after_s is None or tick.after_s > 5.0
    assert c.clock.rate() < 20.0


def test_a_response_that_ends_past_what_is_left_before_the_cut_reaches_it_is_cut_too():
    c = dataset_budget(made=400, speed=10.0)  # slow clock: the cut is planned for later than the answer
    c.start(1.0)
    c.sent(prompt(1), "r1", now=1.0)
    kept = answer(c, prompt(1), "r1", GenerateResult([5] * 250, "stop", 3, 250, "r1"), e2e_s=1.0, now=2.0)
    assert kept == [Keep(GenerateResult([5] * 100, "length", 3, 100, "r1"), generated=250)]


def test_a_cut_request_whose_output_the_server_lost_gives_its_row_back_and_cutting_goes_on():
    c = dataset_budget(made=400, speed=100.0)
    c.start(1.0)
    c.sent(prompt(1), "r1", now=1.0)
    c.tick(now=2.0)
    lost = GenerateResult([], "abort", 3, 0, "r1", output_lost=True)
    assert answer(c, prompt(1), "r1", lost, e2e_s=1.0, now=2.0) == [SendAgain((prompt(1),))]
    c.finished(1, "r1", now=2.0)
    assert c.cuts_at_budget and c.mode == BudgetMode.OPEN


def test_a_server_that_loses_most_cut_outputs_turns_cutting_off():
    assert not loses_cut_outputs(1, 0) and not loses_cut_outputs(3, 3) and loses_cut_outputs(3, 2)
    c = dataset_budget(made=400, speed=100.0)
    c.start(1.0)
    lost = [GenerateResult([], "abort", 3, 0, f"r{i}", output_lost=True) for i in range(3)]
    for i, result in enumerate(lost):
        c.sent(prompt(i), result.rid, now=1.0)
    c.tick(now=2.0)
    assert [answer(c, prompt(i), r.rid, r, e2e_s=1.0, now=2.0) for i, r in enumerate(lost)] == [
        [SendAgain((prompt(i),))] for i in range(3)]
    # Judged once the whole cut is answered: its lost answers may come back before its others.
    assert [StopCuttingAtBudget() in c.finished(i, r.rid, now=2.0) for i, r in enumerate(lost)] == [False, False, True]
    assert not c.cuts_at_budget
    c.stop_cutting_at_budget()  # the scheduler tells every dataset, this one too: nothing changes twice
    assert not c.cuts_at_budget and c.must_cut(2.0) is False


def test_traces_are_kept_whole_past_the_budget():
    c = dataset_budget(made=490)
    c.start(1.0)
    trace = prompt(1, response_ids=[5] * 50)
    c.sent(trace, "r1", now=1.0)
    result = GenerateResult([5] * 50, "stop", 3, 50, "r1")
    assert c.answered(trace, "r1", result, 0.0, 1.0) == [Keep(result)]


# ---- settling and the receiver --------------------------------------------------------------------


def test_aborting_a_replica_that_cannot_fit_one_more_response_settles_at_its_start():
    c = dataset_budget(cut=False, made=480)  # 20 left of its share; a response is expected at ~500
    assert c.mode == BudgetMode.PENDING
    c.start(0.0)
    assert c.mode == BudgetMode.SETTLED and not c.may_send(0.0, Reach.FILLING) and c.is_covered(0.0, Reach.FILLING)


def test_a_settled_replica_becomes_the_receiver_again_when_the_receivers_rows_run_out():
    c = dataset_budget(cut=False, made=480)
    c.start(0.0)
    assert c.mode == BudgetMode.SETTLED and not c.is_receiver()
    c.peers_reported({0: dataset_progress(300, state="Exhausted", budget_tokens=BUDGET)}, stopped=False, now=1.0)
    assert c.is_receiver() and c.mode == BudgetMode.OPEN
    assert c.remaining(1.0) == BUDGET - 480 - 300  # exact: the exhausted replica's tokens are final
    assert c.may_send(1.0, Reach.FILLING)


def test_an_exhausted_receiver_hands_the_dataset_to_the_next_replica_only():
    third = dataset_budget(replicas=3, replica=2, cut=False)
    third.start(0.0)
    exhausted = dataset_progress(300, state="Exhausted", budget_tokens=BUDGET)
    third.peers_reported({0: exhausted, 1: dataset_progress(100, budget_tokens=BUDGET)}, stopped=False, now=1.0)
    assert not third.is_receiver()  # replica 1 still has rows: it is next in the order
    third.peers_reported({0: exhausted, 1: exhausted}, stopped=False, now=2.0)
    assert third.is_receiver()


def test_a_report_under_another_budget_keeps_no_replica_settled():
    old = dataset_progress(300, state="Exhausted", budget_tokens=BUDGET // 2)
    c = dataset_budget(cut=False)
    c.start(0.0)
    c.peers_reported({0: old}, stopped=False, now=1.0)
    assert not c.is_receiver() and c.tokens == 300


def test_the_receiver_trims_what_the_others_in_flight_make_unnecessary_once_the_others_settled():
    c = dataset_budget(replica=0, cut=False)
    c.start(0.0)
    c.peers_reported({1: dataset_progress(500, settled=True, budget_tokens=BUDGET)}, stopped=False, now=0.0)
    for row in (1, 2, 3):  # three expected at ~500 each for the 500 left
        c.sent(prompt(row), f"r{row}", now=0.0)
    c.skipped(3, "r3")  # answered already: its record is written, it is never sent again
    actions = c.finished(99, "r99", now=0.0)  # any event that moves the estimate
    assert [a for a in actions if isinstance(a, (Abort, SendAgain))] == [Abort(("r2",)), SendAgain((prompt(2),))]
    assert set(c.requests) == {1, 3}


def test_no_replica_trims_before_every_other_settled():
    c = dataset_budget(replica=0, cut=False)
    c.start(0.0)
    for row in (1, 2, 3):
        c.sent(prompt(row), f"r{row}", now=0.0)
    assert not [a for a in c.finished(99, "r99", now=0.0) if isinstance(a, Abort)]


# ---- stopping -------------------------------------------------------------------------------------


def test_the_response_that_meets_the_budget_stops_the_dataset_with_everything_in_flight():
    c = dataset_budget(replicas=1, replica=0, cut=False, made=900)
    c.start(0.0)
    c.sent(prompt(1), "r1", now=0.0)
    c.sent(prompt(2), "r2", now=0.0)
    done = answer(c, prompt(1), "r1", GenerateResult([5] * 100, "stop", 3, 100, "r1"), e2e_s=1.0, now=1.0)
    # Both rids: the engine cancels what still runs (r1's Task is ending on its own).
    assert done[-1] == Stop(("r1", "r2"))
    assert c.mode == BudgetMode.STOPPED and not c.wants_more() and c.state() == DatasetState.BUDGET_MET
    assert c.finished(2, "r2", now=1.0) == [] and c.stop() == []


def test_an_external_stop_stops_a_started_dataset_and_only_once():
    c = dataset_budget(replicas=1, replica=0, cut=False)
    c.start(0.0)
    c.sent(prompt(1), "r1", now=0.0)
    assert c.peers_reported({}, stopped=True, now=1.0)[0] == Stop(("r1",))
    assert c.peers_reported({}, stopped=True, now=2.0) == []


def test_a_dataset_not_started_is_not_stopped_by_a_report_but_on_its_start():
    c = dataset_budget(cut=False)
    assert c.peers_reported({}, stopped=True, now=0.0) == [] and c.is_done()
    assert Stop(()) in c.start(1.0)


def test_a_server_abort_of_its_own_leaves_the_row_for_the_next_run_unless_stopping():
    c = dataset_budget(replicas=1, replica=0, cut=False)
    c.start(0.0)
    c.sent(prompt(1), "r1", now=0.0)
    aborted = GenerateResult([], "abort", 3, 0, "r1")
    assert c.answered(prompt(1), "r1", aborted, 1.0, 1.0) == [LeaveForNextRun(1, "aborted by the server")]
    assert c.transient_failures == 1
    c.stop()
    assert c.answered(prompt(1), "r1", aborted, 1.0, 1.0) == []


# ---- the room a request is sent with ---------------------------------------------------------------


def test_a_request_sent_near_the_end_carries_no_more_than_the_room_left():
    c = dataset_budget(replicas=1, replica=0, cut=True, made=600, speed=100.0)  # 400 left
    c.start(0.0)
    assert c.max_new_tokens(prompt(1), 0.0) == 400
    c.sent(prompt(1), "r1", now=0.0, max_new_tokens=400)
    assert c.max_new_tokens(prompt(2), 1.0) == 300  # r1 has made about 100 of the 400
    aborting = dataset_budget(replicas=1, replica=0, cut=False, made=600)
    assert aborting.max_new_tokens(prompt(1), 0.0) == 1000  # only complete responses are kept: the class's limit


def test_a_response_the_server_stopped_at_the_room_is_kept_as_cut_at_the_budget():
    c = dataset_budget(replicas=1, replica=0, cut=True, made=600)
    c.start(0.0)
    c.sent(prompt(1), "r1", now=0.0, max_new_tokens=400)
    [keep] = c.answered(prompt(1), "r1", GenerateResult([5] * 400, "length", 10, 400, "r1"), 4.0, 4.0)
    assert keep == Keep(GenerateResult([5] * 400, "length", 10, 400, "r1"), generated=400)
    c.sent(prompt(2), "r2", now=0.0)  # sent with its class's limit: a length answer is truncation there
    [keep] = c.answered(prompt(2), "r2", GenerateResult([5] * 300, "length", 10, 300, "r2"), 4.0, 4.0)
    assert keep.generated is None


# ---- the pure helpers -----------------------------------------------------------------------------


def test_surplus_trims_the_newest_while_the_older_still_cover_the_need():
    finals = {1: 3000.0, 2: 2000.0, 3: 1000.0, 4: 1000.0}  # oldest first
    assert surplus(finals, 5000) == [4, 3]
    assert surplus(finals, 6500) == []
    assert surplus(finals, 0) == [4, 3, 2, 1]  # nothing needed: all of it is surplus
    assert surplus({}, 100) == []


def test_a_peers_settled_word_counts_only_under_the_same_budget():
    settled = dataset_progress(900, settled=True, budget_tokens=1000)
    assert peer_spend(settled, 1000) == Spend(900, settled=True)
    assert peer_spend(settled, 3000) == Spend(900)  # the budget was raised since: it owes a new share
    exhausted = dataset_progress(400, state="Exhausted", budget_tokens=1000)
    assert peer_spend(exhausted, 1000) == Spend(400, settled=True, exhausted=True)


@pytest.mark.parametrize("previous, settled", [
    (None, False),
    (dataset_progress(900, settled=True, budget_tokens=1000), True),
    (dataset_progress(900, settled=True, budget_tokens=2000), False),  # the budget changed since
    (dataset_progress(900, budget_tokens=1000), False),
])
def test_a_restarted_replica_stays_settled_under_the_same_budget_only(previous, settled):
    assert still_settled(previous, 1000) is settled


def test_sample_cap_shares_add_up():
    assert sum(replica_sample_cap(17, 4, r) for r in range(4)) == 17 and replica_sample_cap(None, 4, 0) is None


def cut_on_end_ids(output_ids: list[int]) -> tuple[DatasetBudget, list]:
    """100 left of this replica's share, end id 2: one request cut, answering `output_ids`."""
    c = dataset_budget(made=400, speed=100.0, end_ids=frozenset({2}))
    c.start(1.0)
    c.sent(prompt(1), "r1", now=1.0)
    c.tick(now=2.0)
    result = GenerateResult(output_ids, "abort", 3, len(output_ids), "r1")
    return c, answer(c, prompt(1), "r1", result, e2e_s=1.0, now=2.0)


def test_a_cut_answer_ending_on_an_end_token_is_a_complete_response():
    # The abort's step skips the server's end checks: the end token it made is kept, and it ends
    # the response as it would have ended anyway.
    c, kept = cut_on_end_ids([5] * 59 + [2])
    assert kept == [Keep(GenerateResult([5] * 59 + [2], "stop", 3, 60, "r1"))]
    assert c.totals.cut_records == 0 and c.own_tokens == 460


def test_an_end_token_past_what_is_left_does_not_make_the_kept_part_complete():
    _, kept = cut_on_end_ids([5] * 129 + [2])
    assert kept == [Keep(GenerateResult([5] * 100, "length", 3, 100, "r1"), generated=130, estimated=100)]


def test_a_replica_stopped_at_its_share_of_the_sample_cap_says_its_tokens_are_final_and_the_receiver_ends():
    """Budget 1,000 and a cap of 10 over two replicas (5 each), both near binding: replica 1 stops at
    its 5th sample with 400 tokens. Its report says it sends no more (settled), so the receiver, which
    counted on it to bring more, makes the rest of the budget and ends, instead of waiting for good."""
    other, receiver = dataset_budget(replica=1, sample_cap=5), dataset_budget(replica=0, sample_cap=5)
    for c, samples in ((other, 5), (receiver, 4)):
        c.start(0.0)
        for row in range(samples):
            c.sent(prompt(row), f"r{row}", now=0.0)
            answer(c, prompt(row), f"r{row}", GenerateResult([5] * 80, "stop", 3, 80, f"r{row}"), e2e_s=0.1, now=0.1)
            c.finished(row, f"r{row}", now=0.1)
    assert other.stopped and other.own_tokens == 400
    report = other.progress(other.totals, 1.0)
    assert report.state == DatasetState.BUDGET_MET and report.settled
    receiver.peers_reported({1: report}, stopped=False, now=1.0)
    assert receiver.tokens == 720 and receiver.is_receiver()
    assert receiver.may_send(1.0, Reach.FILLING)  # its 5th sample may bring the 280 left
    receiver.sent(prompt(4), "r4", now=1.0)
    answer(receiver, prompt(4), "r4", GenerateResult([5] * 80, "stop", 3, 80, "r4"), e2e_s=0.1, now=1.1)
    assert receiver.stopped  # its share of the cap: the dataset is done at 10 samples, 800 tokens
