"""kstatus-style conditions: one entry per type, lastTransitionTime moving only when status moves;
one setter per condition type, each saying when it is True and what it says then."""

from __future__ import annotations

from enum import StrEnum

from draftgen_contracts.states import Phase

from . import reasons
from .api import Condition
from .policies.capacity_policy import Capacity
from .policies.phase_policy import ShownPhase
from .reasons import Explanation, Reason


class ConditionType(StrEnum):
    READY = "Ready"
    PROGRESSING = "Progressing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"
    BUDGETS_REACHABLE = "BudgetsReachable"
    CAPACITY = "Capacity"
    BLOCKED = "Blocked"
    AT_BUDGET = "AtBudget"


PROGRESSING_PHASES = (Phase.PENDING, Phase.GENERATING, Phase.MERGING, Phase.EXTRACTING)
# A Pending that waits for the user, not for the cluster: nothing progresses until the spec or the volumes change.
STALLED_REASONS = (Reason.VOLUME_MISSING, Reason.OUTPUT_IN_USE, Reason.VOLUME_FULL)


def set_condition(conditions: list[Condition], type_: str, status: bool, reason: str, message: str, now: str,
                  generation: int | None) -> list[Condition]:
    value = "True" if status else "False"
    old = next((c for c in conditions if c.type == type_), None)
    since = old.last_transition_time if old is not None and old.status == value else now
    new = Condition(type=type_, status=value, reason=reason, message=message, last_transition_time=since,
                    observed_generation=generation)
    return [c for c in conditions if c.type != type_] + [new] if old is None else \
        [new if c.type == type_ else c for c in conditions]


def condition(conditions: list[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)


def set_ready(c: list[Condition], shown: ShownPhase, now: str, generation: int | None) -> list[Condition]:
    return set_condition(c, ConditionType.READY, shown.phase == Phase.SUCCEEDED, shown.reason, shown.message, now,
                         generation)


def set_progressing(c: list[Condition], shown: ShownPhase, now: str, generation: int | None) -> list[Condition]:
    moving = shown.phase in PROGRESSING_PHASES and shown.reason not in STALLED_REASONS
    return set_condition(c, ConditionType.PROGRESSING, moving, shown.reason, shown.message, now, generation)


def set_succeeded(c: list[Condition], shown: ShownPhase, now: str, generation: int | None) -> list[Condition]:
    done = shown.phase == Phase.SUCCEEDED
    return set_condition(c, ConditionType.SUCCEEDED, done, shown.reason, shown.message if done else "", now,
                         generation)


def set_failed(c: list[Condition], shown: ShownPhase, now: str, generation: int | None) -> list[Condition]:
    failed = shown.phase == Phase.FAILED
    return set_condition(c, ConditionType.FAILED, failed, shown.reason if failed else Reason.NOT_FAILED,
                         shown.message if failed else "", now, generation)


def set_suspended(c: list[Condition], shown: ShownPhase, now: str, generation: int | None) -> list[Condition]:
    suspended = shown.phase == Phase.SUSPENDED
    return set_condition(c, ConditionType.SUSPENDED, suspended, Reason.SUSPENDED if suspended else Reason.NOT_SUSPENDED,
                         shown.message if suspended else "", now, generation)


def set_budgets_reachable(c: list[Condition], short: str | None, now: str, generation: int | None) -> list[Condition]:
    """`short`: what falls short of which budget (draftgen.estimate.budgets_out_of_reach); None: nothing does."""
    said = Explanation(Reason.BUDGET_OUT_OF_REACH, short) if short else reasons.ROWS_SUFFICE
    return set_condition(c, ConditionType.BUDGETS_REACHABLE, short is None, *said, now, generation)


def set_at_budget(c: list[Condition], notices: list[str], now: str, generation: int | None) -> list[Condition]:
    """What the replicas do at the budget otherwise than spec.atBudget says (their notices); gone while
    nothing is, so the condition appears only to say so."""
    if not notices:
        return [x for x in c if x.type != ConditionType.AT_BUDGET]
    return set_condition(c, ConditionType.AT_BUDGET, False, Reason.CUT_OFF, "; ".join(notices), now, generation)


def set_capacity(c: list[Condition], capacity: Capacity | None, now: str, generation: int | None) -> list[Condition]:
    """How many generation replicas are ready and why the others are not; gone when none run (`capacity` None)."""
    if capacity is None:
        return [x for x in c if x.type != ConditionType.CAPACITY]
    first = capacity.first_block() or (capacity.waits[0] if capacity.waits else None)
    message = f"{capacity.ready} of {capacity.requested} generation replicas ready" + (
        f"; {capacity.why_not()}" if capacity.waits else "")
    return set_condition(c, ConditionType.CAPACITY, not capacity.waits,
                         first.reason if first else Reason.ALL_REPLICAS_READY, message, now, generation)


def set_blocked(c: list[Condition], refused: Explanation | None, now: str, generation: int | None) -> list[Condition]:
    """`refused`: the writes the API server refuses for now; None: none is."""
    said = refused or Explanation(Reason.NOT_BLOCKED, "")
    return set_condition(c, ConditionType.BLOCKED, refused is not None, *said, now, generation)
