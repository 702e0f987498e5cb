"""How the replicas of a run share one dataset's budget without spending the same tokens twice
(docs/budgets.md has the design and its arithmetic). Pure; nothing here does I/O.

Each replica owns a fixed share of every budget (`static_share`: the shares add up to the budget
exactly), so it never needs another replica's count to know what it may spend: a stale view can
delay the end, never overshoot it. One replica, the *receiver* (the datasets take turns; it moves
on when its rows run out), finishes the dataset: it works up to its share less a reserve, waits
until every other replica has *settled* (sends no more for the dataset, nothing in flight, its
tokens final), then makes exactly what the settled totals leave of the budget. The other replicas
aim under their shares by a margin (`wants_another`), and their last responses, over or under, are
absorbed there, so the dataset has one tail instead of one per replica. A replica that cannot fit
one more request in what is left of its share settles instead (`settles`): the receiver makes it.

What happens to the requests still in flight when a replica's part is made is the run's choice
(`AT_BUDGET`): `cut` keeps their partial responses (cut at the budget, marked truncated), so a
replica can fill every slot up to its part and make it exactly; `abort` throws them away and keeps
complete responses only, so a replica must hold dispatch early instead (the margin below).

A replica's published facts are durable (its progress is written after its output is synced) and
`settled` is sticky for a budget, so a restarted replica resumes the same share and a restarted
operator has nothing to hand out: shares follow from the spec and the reports alone.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

# What `spec.atBudget` may say: how the requests in flight end when a replica's part is made.
CUT, ABORT = "cut", "abort"
AT_BUDGET = (CUT, ABORT)


@dataclass(frozen=True)
class Spend:
    """What one replica has published about one dataset."""

    tokens: int
    settled: bool = False  # sends no more for the dataset and has nothing in flight: `tokens` is final
    exhausted: bool = False  # its rows ran out (it is settled too)


def static_share(budget_tokens: int, replicas: int, replica: int) -> int:
    """This replica's fixed part of a budget: the parts add up to the budget exactly."""
    return budget_tokens // replicas + (1 if replica < budget_tokens % replicas else 0)


def first_receiver(dataset_index: int, replicas: int) -> int:
    """Where a dataset's receiver is looked for first: the datasets of a run take turns, so the
    last part of each is made by a different replica and their ends overlap (with one receiver
    for all, it made every dataset's tail while the others idled)."""
    return dataset_index % replicas


def receiver(replicas: int, exhausted: set[int], first: int = 0) -> int | None:
    """The replica that finishes the dataset: the first whose rows have not run out, in the order
    first, first + 1, ... (mod replicas); None when every replica's have. Exhaustion only
    accumulates, so the receiver only moves along that order, and a replica is the receiver only
    once every replica before it has said its rows are gone."""
    return next((r for r in ((first + i) % replicas for i in range(replicas)) if r not in exhausted), None)


# Expected responses per other replica that the receiver keeps back of its own share: what a
# replica ends over its share by, with heavy-tailed lengths (docs/budgets.md, measured).
RESERVE_RESPONSES = 4


def receiver_reserve(replicas: int, expected_response: float, cut: bool = False) -> int:
    """What the receiver keeps back of its own share until the others settle, to absorb their
    errors: the others end over their shares as often as under. When the requests in flight are
    cut at the budget, every replica makes its share exactly and there is nothing to absorb."""
    return 0 if cut else round((replicas - 1) * RESERVE_RESPONSES * expected_response)


def allowance(budget_tokens: int, replicas: int, replica: int, own_tokens: int, peers: dict[int, Spend],
              expected_response: float, first: int = 0, cut: bool = False) -> int:
    """Tokens this replica may still bring to the dataset (>= 0).

    - Any replica but the receiver: its static share less what it made.
    - The receiver, while some other replica has not settled (or has never reported): its static
      share less the reserve, less what it made.
    - The receiver once every other replica has settled: the budget less every replica's tokens.
      Settled totals are final, so this is exact however old the view is.
    """
    exhausted = {r for r, s in peers.items() if s.exhausted}
    share = static_share(budget_tokens, replicas, replica)
    if receiver(replicas, exhausted, first) != replica:
        return max(0, share - own_tokens)
    others = [r for r in range(replicas) if r != replica]
    if all(r in peers and peers[r].settled for r in others):
        return max(0, budget_tokens - own_tokens - sum(peers[r].tokens for r in others))
    return max(0, share - receiver_reserve(replicas, expected_response, cut) - own_tokens)


# Standard deviations of what the requests in flight will bring that a replica keeps below what it
# may add, while its overshoot would not be trimmed: what it leaves, the receiver makes exactly.
MARGIN_SD = 1.5


@dataclass(frozen=True)
class Outlook:
    """What a replica's requests in flight for a dataset are expected to bring, and one more request."""

    coverage: float  # the expected final lengths of the requests in flight, summed
    variance: float  # of that sum (the requests are independent)
    response: float  # the expected length of a request not sent yet
    response_variance: float
    partial: float = 0.0  # what the requests in flight have generated so far, summed
    in_flight: int = 0

    def nothing_in_flight(self) -> Outlook:
        return Outlook(0.0, 0.0, self.response, self.response_variance)


def aims_exactly(is_receiver: bool, others_settled: bool) -> bool:
    """Whether a replica aims at what it may add itself, not below it: only the receiver once every
    other replica has settled, whose remaining figure is exact and whose surplus is trimmed."""
    return is_receiver and others_settled


# The least a request sent to fill the last slots is left to make before the cut: smaller pieces
# would end the run in a cloud of few-token samples.
MIN_PIECE_TOKENS = 256

# What a dataset's requests in flight may be expected to bring, as a share of what is left of its
# part, while another dataset of the process would take the other slots within its own share. What
# is in flight then shrinks with what is left, so few requests are out at the cut; with the whole
# part in flight (a share of 1M over 4 replicas is one wave of a class's 150 requests), a quarter of
# the kept tokens were cut responses, over half for some datasets (docs/budgets.md).
IN_FLIGHT_SHARE = 0.25


class Reach(enum.Enum):
    """How much of what is left a dataset may have in flight, cutting at the budget: as much as the
    other datasets of the process leave it (the generate scheduler's `reach`)."""

    INTERLEAVED = "interleaved"  # another dataset would take a free slot within its IN_FLIGHT_SHARE
    HOLDING = "holding"  # another would take one within what is left of its part
    FILLING = "filling"  # nothing else would: the server stays full to the cut


def wants_another(exact: bool, remaining: int, outlook: Outlook, cut: bool = False,
                  reach: Reach = Reach.HOLDING) -> bool:
    """Whether one more request should be sent.

    Cutting at the budget (`cut`), an overshoot is never generated, so every replica aims exactly,
    one request at least, as far as `reach`:
    - INTERLEAVED: while the requests in flight are expected to bring less than `IN_FLIGHT_SHARE`
      of `remaining`;
    - HOLDING: less than `remaining`;
    - FILLING: while every request in flight, and one more, still has `MIN_PIECE_TOKENS` to make
      before the cut; the requests still out at the cut are kept cut.

    Aborting at the budget:
    - aiming exactly: while the requests in flight are expected to bring less than `remaining`
      (it must reach the budget; a surplus is trimmed).
    - otherwise: while the requests in flight and one more are expected to stay under `remaining`
      by `MARGIN_SD` standard deviations. An undershoot costs nothing (the receiver makes it),
      an overshoot past the receiver's reserve makes the total cross the budget with requests of
      every replica in flight, all of them aborted.
    """
    if cut:
        if remaining <= 0 or outlook.in_flight == 0:
            return remaining > 0
        if reach is Reach.FILLING:
            return outlook.partial + MIN_PIECE_TOKENS * (outlook.in_flight + 1) <= remaining
        share = IN_FLIGHT_SHARE if reach is Reach.INTERLEAVED else 1.0
        return outlook.coverage < share * remaining
    if exact:
        return outlook.coverage < remaining
    spread = math.sqrt(outlook.variance + outlook.response_variance)
    return outlook.coverage + outlook.response + MARGIN_SD * spread <= remaining


def settles(is_receiver: bool, remaining: int, in_flight: int, outlook: Outlook, cut: bool = False) -> bool:
    """Whether a replica stops for good on a dataset (until the budget changes): not the receiver,
    nothing in flight, and its share made (cutting) or not even one more request fits what is
    left of it within the margin (aborting); the receiver makes the rest."""
    if is_receiver or in_flight:
        return False
    return remaining <= 0 if cut else not wants_another(False, remaining, outlook.nothing_in_flight())


def cuts_now(remaining: int, outlook: Outlook) -> bool:
    """Whether the requests in flight, cutting at the budget, have made what this replica may add:
    then every one of them is stopped and its partial response kept, cut to what is left. (Cutting
    the oldest first and letting the youngest run on, to cut those on a clock the first answers
    had corrected, was measured worse: the young ones ran on unwatched while the first answers
    came in, and overshot.)"""
    return outlook.in_flight > 0 and outlook.partial >= remaining


def room(remaining: int, outlook: Outlook) -> int:
    """What this replica may still add that no request in flight has made yet: once one request
    alone has made it, the cut has come (`cuts_now`)."""
    return max(0, remaining - math.ceil(outlook.partial))


def seconds_to_cut(remaining: int, outlook: Outlook, speed: float) -> float | None:
    """When the requests in flight, each generating `speed` tokens/s, will have made `remaining`
    (None: no request in flight, or no speed measured yet)."""
    if outlook.in_flight == 0 or speed <= 0:
        return None
    return max(0.0, (remaining - outlook.partial) / (outlook.in_flight * speed))
