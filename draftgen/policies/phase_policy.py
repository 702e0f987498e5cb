"""Phase policy: which phase does a DatasetGeneration show over its stage, and what do its Ready and
Progressing conditions say? The first that holds wins:

    Failed > Suspended > Pending, OutputInUse > Pending, VolumeMissing > the stage, VolumeFull
    > Succeeded (stage Done)
    > Pending, Preflight (or PodsRefused: its pods refused, not for good)
    > Pending, WaitingForServers (Generating, no replica reported yet; Capacity's block when no replica runs)
    > the stage, Queued (its merge or extraction Job held by a queue)
    > Merging, BudgetsMet > Generating (tokens of the budget) > Extracting

A failure goes first since nothing clears it but a new spec; it is no failure while suspended (the
caller decides none), so the Jobs suspension deleted do not fail the run. An output folder taken
and a volume missing stop every stage, so they go before any stage's own state; a full volume stops
the stage it is in.
"""

from __future__ import annotations

from dataclasses import dataclass

from draftgen_contracts.states import Phase, Stage

from .. import reasons
from ..reasons import Explanation, Reason
from .capacity_policy import Capacity

RUNNING_PHASE = {Stage.GENERATING: Phase.GENERATING, Stage.MERGING: Phase.MERGING, Stage.EXTRACTING: Phase.EXTRACTING}


@dataclass(frozen=True)
class PhaseFacts:
    """What the phase follows from, as one reconcile found it."""

    stage: Stage
    failure: Explanation | None = None  # why the run failed; None while suspended
    suspended: bool = False
    output_in_use: Explanation | None = None  # another object owns the output folder
    missing_claims: tuple[str, ...] = ()
    volume_full: Explanation | None = None  # a stage stopped by a full output volume
    extraction_enabled: bool = False
    preflight_refused: str = ""  # the preflight Job's last FailedCreate message
    reported: bool = False  # some generation replica has published its progress
    capacity: Capacity | None = None  # where generation pods are observed
    stage_job_queued: Explanation | None = None  # the merge or extraction Job held by a queue
    progress: str = ""
    budget_tokens: int = 0


@dataclass(frozen=True)
class ShownPhase:
    """The phase, and the reason and message of Ready and Progressing."""

    phase: Phase
    reason: str
    message: str


def phase_of(facts: PhaseFacts) -> ShownPhase:
    if facts.failure:
        return ShownPhase(Phase.FAILED, *facts.failure)
    if facts.suspended:
        return ShownPhase(Phase.SUSPENDED, *reasons.SUSPEND_REQUESTED)
    if facts.output_in_use:
        return ShownPhase(Phase.PENDING, *facts.output_in_use)
    if facts.missing_claims:
        return ShownPhase(Phase.PENDING, *reasons.volume_missing(facts.missing_claims))
    if facts.volume_full:
        return ShownPhase(RUNNING_PHASE.get(facts.stage, Phase.PENDING), *facts.volume_full)
    if facts.stage == Stage.DONE:
        return ShownPhase(Phase.SUCCEEDED, *reasons.succeeded(facts.extraction_enabled))
    if facts.stage == Stage.PREFLIGHT:
        return ShownPhase(Phase.PENDING, *preflight_wait(facts.preflight_refused))
    if facts.stage == Stage.GENERATING and not facts.reported:
        return ShownPhase(Phase.PENDING, *servers_wait(facts.capacity))
    if facts.stage_job_queued:
        return ShownPhase(RUNNING_PHASE[facts.stage], *facts.stage_job_queued)
    if facts.stage == Stage.MERGING:
        return ShownPhase(Phase.MERGING, *reasons.MERGING_CORPUS)
    if facts.stage == Stage.GENERATING:
        return ShownPhase(Phase.GENERATING, *reasons.generating(facts.progress, facts.budget_tokens))
    return ShownPhase(Phase.EXTRACTING, *reasons.EXTRACTING_HIDDEN_STATES)


def preflight_wait(refused: str) -> Explanation:
    return reasons.preflight_pods_refused(refused) if refused else reasons.CHECKING_PREFLIGHT


def servers_wait(capacity: Capacity | None) -> Explanation:
    """Before any replica reports: the pods' counts and why each is not ready, where pods are observed.
    The reason is a replica's block only when no replica runs, and not for want of time."""
    if capacity is None:
        return reasons.SERVERS_STARTING
    blocked = capacity.first_block()
    nothing_runs = blocked is not None and len(capacity.waits) == capacity.requested
    return Explanation(blocked.reason if nothing_runs else Reason.WAITING_FOR_SERVERS,
                       capacity.counts() + (f"; {capacity.why_not()}" if capacity.waits else ""))
