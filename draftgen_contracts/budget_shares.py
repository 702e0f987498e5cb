"""How the replicas of a run share one dataset's budget without spending the same tokens twice
(docs/budgets.md has the design and its arithmetic). Pure; nothing here does I/O.

Each replica owns a fixed share of every budget (`static_share`: the shares add up to the budget
exactly), so it never needs another replica's count to know what it may spend: a stale view can
delay the end, never overshoot it. One replica, the *receiver* (the lowest index whose rows have not
run out), finishes the dataset: it works up to its share less a reserve, waits until every other
replica has *settled* (sends no more for the dataset, nothing in flight, its tokens final), then
makes exactly what the settled totals leave of the budget. The other replicas' last responses,
over or under their shares, are absorbed there, so the dataset has one tail instead of one per
replica. A replica whose remaining share is less than one expected response settles instead of
sending one more (`settles`): the receiver makes it.

A replica's published facts are durable (its progress is written after its output is synced) and
`settled` is sticky for a budget, so a restarted replica resumes the same share and a restarted
operator has nothing to hand out: shares follow from the spec and the reports alone.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Spend:
    """What one replica has published about one dataset."""

    tokens: int
    settled: bool = False  # sends no more for the dataset and has nothing in flight: `tokens` is final
    exhausted: bool = False  # its rows ran out (it is settled too)


def static_share(budget_tokens: int, replicas: int, replica: int) -> int:
    """This replica's fixed part of a budget: the parts add up to the budget exactly."""
    return budget_tokens // replicas + (1 if replica < budget_tokens % replicas else 0)


def receiver(replicas: int, exhausted: set[int]) -> int | None:
    """The replica that finishes the dataset: the lowest index whose rows have not run out (None
    when every replica's have). Exhaustion only accumulates, so the receiver only moves up, and a
    replica is the receiver only once every replica below it has said its rows are gone."""
    return next((r for r in range(replicas) if r not in exhausted), None)


# Expected responses per other replica that the receiver keeps back of its own share: what a
# replica ends over its share by, with heavy-tailed lengths (docs/budgets.md, measured).
RESERVE_RESPONSES = 4


def receiver_reserve(replicas: int, expected_response: float) -> int:
    """What the receiver keeps back of its own share until the others settle, to absorb their
    errors: the others end over their shares as often as under."""
    return round((replicas - 1) * RESERVE_RESPONSES * expected_response)


def allowance(budget_tokens: int, replicas: int, replica: int, own_tokens: int, peers: dict[int, Spend],
              expected_response: float) -> int:
    """Tokens this replica may still bring to the dataset (>= 0).

    - Any replica but the receiver: its static share less what it made.
    - The receiver, while some other replica has not settled (or has never reported): its static
      share less the reserve, less what it made.
    - The receiver once every other replica has settled: the budget less every replica's tokens.
      Settled totals are final, so this is exact however old the view is.
    """
    exhausted = {r for r, s in peers.items() if s.exhausted}
    share = static_share(budget_tokens, replicas, replica)
    if receiver(replicas, exhausted) != replica:
        return max(0, share - own_tokens)
    others = [r for r in range(replicas) if r != replica]
    if all(r in peers and peers[r].settled for r in others):
        return max(0, budget_tokens - own_tokens - sum(peers[r].tokens for r in others))
    return max(0, share - receiver_reserve(replicas, expected_response) - own_tokens)


def wants_another(is_receiver: bool, remaining: int, coverage: float, expected_response: float) -> bool:
    """Whether one more request should be sent: the requests in flight are expected to bring less
    than `remaining` (`coverage`), and, for any replica but the receiver, a response's worth is
    left of its share (less than that, it settles once its requests are back)."""
    if not is_receiver and remaining < expected_response:
        return False
    return coverage < remaining


def settles(is_receiver: bool, remaining: int, in_flight: int, expected_response: float) -> bool:
    """Whether a replica stops for good on a dataset (until the budget changes): not the receiver,
    nothing in flight, and what is left of its share is less than one expected response, which
    would most likely overshoot it; the receiver makes the rest."""
    return not is_receiver and in_flight == 0 and remaining < expected_response
