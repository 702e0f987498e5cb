import pytest

from draftgen_contracts.budget_shares import (
    IN_FLIGHT_SHARE,
    MARGIN_SD,
    MIN_PIECE_TOKENS,
    RESERVE_RESPONSES,
    Outlook,
    Reach,
    Spend,
    aims_exactly,
    allowance,
    cuts_now,
    room,
    first_receiver,
    receiver,
    seconds_to_cut,
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


@pytest.mark.parametrize("exhausted,expected", [(set(), 2), ({2}, 0), ({2, 0}, 1), ({0}, 2), ({0, 1, 2}, None)])
def test_the_receiver_moves_along_from_the_datasets_first(exhausted, expected):
    assert receiver(3, exhausted, first=2) == expected


def test_the_datasets_take_turns_as_receivers():
    assert [first_receiver(i, 4) for i in range(6)] == [0, 1, 2, 3, 0, 1]


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


def outlook(coverage=0.0, variance=0.0, response=100.0, response_sd=0.0) -> Outlook:
    return Outlook(coverage, variance, response, response_sd ** 2)


@pytest.mark.parametrize("is_receiver,remaining,in_flight,settled", [
    (False, 50, 0, True),     # less than one response left: the receiver makes it
    (False, 0, 0, True),
    (False, 50, 1, False),    # its last request first
    (False, 500, 0, False),   # a response's worth left: it makes it itself
    (True, 50, 0, False),     # the receiver never settles
])
def test_settles(is_receiver, remaining, in_flight, settled):
    assert settles(is_receiver, remaining, in_flight, outlook()) is settled


def test_a_replica_settles_when_one_more_response_would_pass_its_share_by_more_than_the_margin():
    spread = outlook(response=100.0, response_sd=40.0)
    assert not settles(False, 100 + round(MARGIN_SD * 40) + 1, 0, spread)
    assert settles(False, 100 + round(MARGIN_SD * 40) - 1, 0, spread)


def test_a_budget_smaller_than_one_response_is_made_by_the_receiver_alone():
    expected = 5000.0
    # Every other replica settles at once with nothing made...
    assert all(settles(False, allowance(1000, 4, r, 0, {}, expected), 0, outlook(response=expected))
               for r in (1, 2, 3))
    peers = {r: Spend(0, settled=True) for r in (1, 2, 3)}
    # ... and the receiver then owns the whole budget.
    assert allowance(1000, 4, 0, 0, peers, expected) == 1000


@pytest.mark.parametrize("exact,remaining,seen,wanted", [
    (True, 1000, outlook(900.0), True),
    (True, 1000, outlook(1000.0), False),   # in flight covers it: hold
    (True, 50, outlook(0.0), True),         # the exact receiver makes the last tokens, even less than a response
    (False, 50, outlook(0.0), False),       # anyone else leaves them to the receiver
    (False, 150, outlook(0.0), True),
    (False, 1000, outlook(900.0), True),    # in flight and one more land on it exactly
    (False, 1000, outlook(901.0), False),
    # A spread of 50 (in flight 40, the next one 30): MARGIN_SD of it is kept below the share.
    (False, 1000, outlook(900.0 - MARGIN_SD * 50, variance=40.0 ** 2, response_sd=30.0), True),
    (False, 1000, outlook(901.0 - MARGIN_SD * 50, variance=40.0 ** 2, response_sd=30.0), False),
])
def test_wants_another(exact, remaining, seen, wanted):
    assert wants_another(exact, remaining, seen) is wanted


def test_only_the_receiver_with_every_other_replica_settled_aims_exactly():
    assert aims_exactly(True, True)
    assert not aims_exactly(True, False) and not aims_exactly(False, True)


# ---- cutting at the budget ----------------------------------------------------------------------

def in_flight(partial: float, count: int, coverage: float = 0.0) -> Outlook:
    return Outlook(coverage, 0.0, 100.0, 0.0, partial=partial, in_flight=count)


def test_cutting_the_receiver_keeps_no_reserve():
    unsettled = {1: Spend(1000, settled=True), 2: Spend(600)}
    assert allowance(3000, 3, 0, 500, unsettled, expected_response=10, cut=True) == 1000 - 500


@pytest.mark.parametrize("reach,remaining,seen,wanted", [
    # Interleaved (another dataset would take a free slot within its share): a quarter of what is left.
    (Reach.INTERLEAVED, 1000, in_flight(100.0, 3, coverage=1000 * IN_FLIGHT_SHARE - 1), True),
    (Reach.INTERLEAVED, 1000, in_flight(100.0, 3, coverage=1000 * IN_FLIGHT_SHARE), False),
    (Reach.INTERLEAVED, 10, in_flight(0.0, 0), True),  # one request at least, however little is left
    # Holding (another would take one within what is left of its part): aims exactly.
    (Reach.HOLDING, 1000, in_flight(100.0, 3, coverage=999.0), True),
    (Reach.HOLDING, 1000, in_flight(100.0, 3, coverage=1000.0), False),
    # Filling (nothing else would): by what they have made, each left a piece to make.
    (Reach.FILLING, 1000, in_flight(0.0, 0), True),
    (Reach.FILLING, 10, in_flight(0.0, 0), True),  # less than a piece, nothing in flight: one request makes it
    (Reach.FILLING, 1000, in_flight(1000 - MIN_PIECE_TOKENS * 3, 2, coverage=10_000.0), True),
    (Reach.FILLING, 1000, in_flight(1001 - MIN_PIECE_TOKENS * 3, 2), False),
    (Reach.FILLING, 0, in_flight(0.0, 0), False),
    (Reach.INTERLEAVED, 0, in_flight(0.0, 0), False),
])
def test_wants_another_when_cutting(reach, remaining, seen, wanted):
    assert wants_another(False, remaining, seen, cut=True, reach=reach) is wanted


def test_the_room_is_what_no_request_in_flight_has_made_yet():
    assert room(1000, in_flight(300.4, 3)) == 699
    assert room(1000, in_flight(0.0, 0)) == 1000
    assert room(100, in_flight(250.0, 3)) == 0  # past the cut


def test_cutting_a_replica_settles_when_its_share_is_made_exactly():
    assert settles(False, 0, 0, outlook(), cut=True)
    assert not settles(False, 1, 0, outlook(), cut=True)  # a token short: it makes it itself
    assert not settles(False, 0, 1, outlook(), cut=True) and not settles(True, 0, 0, outlook(), cut=True)


def test_the_cut_comes_when_the_requests_in_flight_have_made_what_remains():
    assert not cuts_now(1000, in_flight(999.0, 4)) and cuts_now(1000, in_flight(1000.0, 4))
    assert not cuts_now(0, in_flight(0.0, 0))  # nothing in flight: nothing to cut


def test_when_the_cut_should_come():
    assert seconds_to_cut(1000, in_flight(600.0, 4), speed=50.0) == 2.0
    assert seconds_to_cut(1000, in_flight(1200.0, 4), speed=50.0) == 0.0
    assert seconds_to_cut(1000, in_flight(0.0, 0), speed=50.0) is None
    assert seconds_to_cut(1000, in_flight(0.0, 2), speed=0.0) is None  # no response back yet
