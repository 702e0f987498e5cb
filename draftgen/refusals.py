"""What the object says when the API server refuses the operator's writes (policies/api_error_policy):
a pure step after the reconcile's decision, once its writes were tried."""

from __future__ import annotations

from draftgen_contracts.states import Phase

from .api import DatasetGenerationStatus
from .conditions import set_blocked, set_failed, set_progressing, set_ready
from .policies.api_error_policy import ApiError, is_permanent, reason_of
from .policies.phase_policy import ShownPhase
from .reasons import Explanation


def with_refusals(status: DatasetGenerationStatus, refused: list[tuple[ApiError, float]], now: str,
                  generation: int) -> DatasetGenerationStatus:
    """`status` as decided, with `refused` (each refusal and the seconds until its next try) said on it:
    a permanent refusal fails the object with the API server's message; transient ones keep the phase
    and set `Blocked`; none clears it."""
    c = status.conditions
    permanent = [e for e, _ in refused if is_permanent(e)]
    if permanent:
        failed = ShownPhase(Phase.FAILED, reason_of(permanent[0]), permanent[0].says())
        for setter in (set_failed, set_ready, set_progressing):
            c = setter(c, failed, now, generation)
        c = set_blocked(c, None, now, generation)
        return status.model_copy(update={"phase": failed.phase, "conditions": c})
    message = "; ".join(f"{e.says()} (trying again in {wait:.0f} s)" for e, wait in refused)
    c = set_blocked(c, Explanation(reason_of(refused[0][0]), message) if refused else None, now, generation)
    return status.model_copy(update={"conditions": c})
