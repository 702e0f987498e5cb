import pytest

from draftgen_contracts.budget_shares import (
    RESERVE_RESPONSES,
    Spend,
    allowance,
    receiver,
    settles,
    static_share,
    wants_another,
)


@pytest.mark.parametrize("budget_tokens,replicas", [(10, 3), (1_000_000, 4), (7, 8), (1, 2)])
def test_static_shares_add_up_to_the_budget(budget_tokens, replicas):
    assert sum(static_share(budget_tokens, replicas, r) for r in range(replicas)) == budget_tokens


@pytest.mark.parametrize("exhausted,expected", [(set(), 0), ({0}, 1), ({0, 1}, 2), ({1}, 0), ({0, 1, 2}, None)])
def test_the_receiver_is_the_lowest_replica_with_rows(exhausted, expected):
    assert receiver(3, exhausted) == expected


def test_a_replica_that_is_not_the_receiver_spends_its_share_whatever_the_others_did():
    peers = {0: Spend(900), 2: Spend(0)}
    assert allowance(3000, 3, 1, 400, peers, expected_response=100) == 600
    assert allowance(3000, 3, 1, 1200, peers, expected_response=100) == 0


def test_the_receiver_keeps_a_reserve_until_every_other_replica_settled():
    unsettled = {1: Spend(1000, settled=True), 2: Spend(600)}
    assert allowance(3000, 3, 0, 500, unsettled, expected_response=10) == 1000 - 2 * RESERVE_RESPONSES * 10 - 500
    settled = {1: Spend(1100, settled=True), 2: Spend(950, settled=True)}
    assert allowance(3000, 3, 0, 500, settled, expected_response=100) == 3000 - 500 - 1100 - 950


def test_the_receiver_waits_for_a_replica_that_never_reported():
    assert allowance(3000, 3, 0, 800, {1: Spend(1000, settled=True)}, expected_response=100) == 0


def test_the_receiver_moves_up_when_its_rows_run_out():
    peers = {0: Spend(300, settled=True, exhausted=True), 2: Spend(1000, settled=True)}
    # Replica 1 now finishes the dataset: it makes what replica 0 could not.
    assert allowance(3000, 3, 1, 1000, peers, expected_response=100) == 700


def test_settled_others_that_overshot_leave_the_receiver_less():
    peers = {1: Spend(1600, settled=True)}
    assert allowance(2000, 2, 0, 300, peers, expected_response=100) == 100
    assert allowance(2000, 2, 0, 500, peers, expected_response=100) == 0


@pytest.mark.parametrize("is_receiver,remaining,in_flight,settled", [
    (False, 50, 0, True),     # less than one response left: the receiver makes it
    (False, 0, 0, True),
    (False, 50, 1, False),    # its last request first
    (False, 500, 0, False),   # a response's worth left: it makes it itself
    (True, 50, 0, False),     # the receiver never settles
])
def test_settles(is_receiver, remaining, in_flight, settled):
    assert settles(is_receiver, remaining, in_flight, expected_response=100) is settled


def test_a_budget_smaller_than_one_response_is_made_by_the_receiver_alone():
    expected = 5000.0
    # Every other replica settles at once with nothing made...
    assert all(settles(False, allowance(1000, 4, r, 0, {}, expected), 0, expected) for r in (1, 2, 3))
    peers = {r: Spend(0, settled=True) for r in (1, 2, 3)}
    # ... and the receiver then owns the whole budget.
    assert allowance(1000, 4, 0, 0, peers, expected) == 1000


@pytest.mark.parametrize("is_receiver,remaining,coverage,wanted", [
    (True, 1000, 900.0, True),
    (True, 1000, 1000.0, False),   # in flight covers it: hold
    (True, 50, 0.0, True),         # the receiver makes the last tokens, even less than a response
    (False, 50, 0.0, False),       # another replica leaves them to the receiver
    (False, 150, 0.0, True),
])
def test_wants_another(is_receiver, remaining, coverage, wanted):
    assert wants_another(is_receiver, remaining, coverage, expected_response=100) is wanted
