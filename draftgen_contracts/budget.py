"""Token budgets: pure decisions shared by `jobrunner generate` and the operator.

A dataset's kept tokens are the completion tokens of its completed responses (finish reason
`stop` or `length`); an aborted response never counts, whatever it generated. With several
replicas sharing one budget, a replica's `tokens` are its own written tokens plus those the other
replicas reported (how they share it: budget_shares); the operator calls the same functions on the
totals it folds from every replica's report. Nothing here does I/O.
"""

from __future__ import annotations

from .states import DatasetState

COUNTED_FINISH_REASONS = frozenset({"stop", "length"})


def kept_tokens(finish_reason: str, completion_tokens: int) -> int:
    """Tokens a response adds to its dataset's total: all of a completed one, none of an aborted one."""
    return completion_tokens if finish_reason in COUNTED_FINISH_REASONS else 0


def is_budget_met(budget_tokens: int, tokens: int) -> bool:
    return tokens >= budget_tokens


def is_sample_cap_reached(sample_cap: int | None, samples: int) -> bool:
    """Whether the optional cap on completed responses is reached (None: no cap)."""
    return sample_cap is not None and samples >= sample_cap


def is_dataset_done(budget_tokens: int, tokens: int, sample_cap: int | None, samples: int, stopped: bool) -> bool:
    """Whether a dataset needs no more responses: budget met, cap reached, or stopped by the coordinator
    (which stops a dataset when the total over all replicas met its budget)."""
    return stopped or is_budget_met(budget_tokens, tokens) or is_sample_cap_reached(sample_cap, samples)


def should_dispatch(
    budget_tokens: int,
    tokens: int,
    sample_cap: int | None,
    samples: int,
    in_flight: int,
    stopped: bool = False,
) -> bool:
    """Whether the dataset still wants requests: until the budget is met (in-flight requests are
    then aborted); with a sample cap, requests in flight count against the cap so the cap is never
    overshot. The engine also holds dispatch back while its requests in flight cover its share
    (draftgen_contracts.budget_shares).
    """
    if is_dataset_done(budget_tokens, tokens, sample_cap, samples, stopped):
        return False
    return sample_cap is None or samples + in_flight < sample_cap


def remaining_tokens(budget_tokens: int, tokens: int) -> int:
    return max(0, budget_tokens - tokens)


def eta_seconds(budget_tokens: int, tokens: int, tokens_per_second: float) -> float | None:
    """Seconds until the budget is met at the current rate; 0 when met, None when there is no rate."""
    remaining = remaining_tokens(budget_tokens, tokens)
    if remaining == 0:
        return 0.0
    if tokens_per_second <= 0:
        return None
    return remaining / tokens_per_second


def dataset_state(
    budget_tokens: int,
    tokens: int,
    sample_cap: int | None = None,
    samples: int = 0,
    *,
    started: bool = False,
    exhausted: bool = False,
    failed: bool = False,
    stopped: bool = False,
) -> DatasetState:
    """The phase of one dataset.

    `BudgetMet` wins over `Exhausted` (a dataset that met its budget with its last rows met it);
    a reached sample cap or a stop from the coordinator also reads as `BudgetMet`: the dataset got
    what was asked of it. `Exhausted` means every row was used and the budget is still short.
    """
    if failed:
        return DatasetState.FAILED
    if is_dataset_done(budget_tokens, tokens, sample_cap, samples, stopped):
        return DatasetState.BUDGET_MET
    if exhausted:
        return DatasetState.EXHAUSTED
    return DatasetState.GENERATING if started or tokens > 0 else DatasetState.PENDING
