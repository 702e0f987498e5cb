"""What the object says when the API server refuses the operator's writes (policies/api_error_policy):
a pure step after the reconcile's decision, once its writes were tried."""

from __future__ import annotations

from draftgen_contracts.states import Phase

from .api import DatasetGenerationStatus
from .conditions import set_condition
from .policies.api_error_policy import ApiError, is_permanent, reason_of


def with_refusals(status: DatasetGenerationStatus, refused: list[tuple[ApiError, float]], now: str,
                  generation: int) -> DatasetGenerationStatus:
    """`status` as decided, with `refused` (each refusal and the seconds until its next try) said on it:
    a permanent refusal fails the object with the API server's message; transient ones keep the phase
    and set `Blocked`; none clears it."""
    c = status.conditions
    permanent = [e for e, _ in refused if is_permanent(e)]
    if permanent:
        first = permanent[0]
        reason, message = reason_of(first), first.says()
        c = set_condition(c, "Failed", True, reason, message, now, generation)
        c = set_condition(c, "Ready", False, reason, message, now, generation)
        c = set_condition(c, "Progressing", False, reason, message, now, generation)
        c = set_condition(c, "Blocked", False, "NotBlocked", "", now, generation)
        return status.model_copy(update={"phase": Phase.FAILED, "conditions": c})
    if refused:
        message = "; ".join(f"{e.says()} (trying again in {wait:.0f} s)" for e, wait in refused)
        c = set_condition(c, "Blocked", True, reason_of(refused[0][0]), message, now, generation)
    else:
        c = set_condition(c, "Blocked", False, "NotBlocked", "", now, generation)
    return status.model_copy(update={"conditions": c})
