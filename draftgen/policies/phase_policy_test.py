import pytest

from draftgen import reasons
from draftgen.observed import PodState
from draftgen.policies.capacity_policy import capacity_of
from draftgen.policies.phase_policy import PhaseFacts, ShownPhase, phase_of
from draftgen.reasons import Explanation, Reason
from draftgen_contracts.states import Phase, Stage

FAILURE = Explanation(Reason.GENERATION_JOB_FAILED, "Job x-gen-r000 failed (BackoffLimitExceeded)")
IN_USE = reasons.output_in_use("data:/x", "first", "draftgen-lock-x")
QUEUED = reasons.queued("x-merge", "cpu-batch", "2026-12-01T10:00:00Z")
QUOTA = 'pods "x-gen-r001-b" is forbidden: exceeded quota: gpus'


def shown(**facts) -> tuple[Phase, str]:
    said = phase_of(PhaseFacts(**{"stage": Stage.GENERATING, "reported": True, **facts}))
    return said.phase, said.reason


@pytest.mark.parametrize("facts, phase, reason", [
    ({"failure": FAILURE}, Phase.FAILED, Reason.GENERATION_JOB_FAILED),
    ({"suspended": True}, Phase.SUSPENDED, Reason.SUSPENDED),
    ({"output_in_use": IN_USE}, Phase.PENDING, Reason.OUTPUT_IN_USE),
    ({"missing_claims": ("data",)}, Phase.PENDING, Reason.VOLUME_MISSING),
    ({"stage": Stage.DONE}, Phase.SUCCEEDED, Reason.SUCCEEDED),
    ({"stage": Stage.PREFLIGHT}, Phase.PENDING, Reason.PREFLIGHT),
    ({"stage": Stage.PREFLIGHT, "preflight_refused": QUOTA}, Phase.PENDING, Reason.PODS_REFUSED),
    ({"reported": False}, Phase.PENDING, Reason.WAITING_FOR_SERVERS),
    ({"stage": Stage.MERGING, "stage_job_queued": QUEUED}, Phase.MERGING, Reason.QUEUED),
    ({"stage": Stage.EXTRACTING, "stage_job_queued": QUEUED}, Phase.EXTRACTING, Reason.QUEUED),
    ({"stage": Stage.MERGING}, Phase.MERGING, Reason.BUDGETS_MET),
    ({}, Phase.GENERATING, Reason.GENERATING),
    ({"stage": Stage.EXTRACTING}, Phase.EXTRACTING, Reason.EXTRACTING),
])
def test_each_branch_shows_its_phase_and_reason(facts, phase, reason):
    assert shown(**facts) == (phase, reason)


@pytest.mark.parametrize("facts, phase, reason", [
    # A failure shows over everything, even a stage that is Done or a folder taken.
    ({"failure": FAILURE, "suspended": True, "stage": Stage.DONE}, Phase.FAILED, Reason.GENERATION_JOB_FAILED),
    ({"suspended": True, "output_in_use": IN_USE, "missing_claims": ("data",)}, Phase.SUSPENDED, Reason.SUSPENDED),
    ({"output_in_use": IN_USE, "missing_claims": ("data",)}, Phase.PENDING, Reason.OUTPUT_IN_USE),
    ({"missing_claims": ("data",), "stage": Stage.DONE}, Phase.PENDING, Reason.VOLUME_MISSING),
    # No replica reported yet: the servers are awaited, even where a merge Job is queued.
    ({"reported": False, "stage_job_queued": QUEUED}, Phase.PENDING, Reason.WAITING_FOR_SERVERS),
    # Reports matter only while generating.
    ({"stage": Stage.MERGING, "reported": False}, Phase.MERGING, Reason.BUDGETS_MET),
])
def test_the_first_that_holds_wins(facts, phase, reason):
    assert shown(**facts) == (phase, reason)


def test_the_messages_name_what_the_phase_waits_for():
    assert phase_of(PhaseFacts(stage=Stage.GENERATING, reported=True, progress="40.0%", budget_tokens=100)) == (
        ShownPhase(Phase.GENERATING, Reason.GENERATING, "40.0% of 100 tokens"))
    assert phase_of(PhaseFacts(stage=Stage.DONE)).message == "corpus ready"
    assert phase_of(PhaseFacts(stage=Stage.DONE, extraction_enabled=True)).message == (
        "corpus ready and hidden states extracted")
    assert phase_of(PhaseFacts(stage=Stage.PREFLIGHT, preflight_refused=QUOTA)).message == (
        f"the preflight Job's pods are refused: {QUOTA}")
    assert phase_of(PhaseFacts(stage=Stage.GENERATING, missing_claims=("data", "models"))).message == (
        "PersistentVolumeClaim data not found, PersistentVolumeClaim models not found")
    assert phase_of(PhaseFacts(stage=Stage.GENERATING)).message == "generation pods are starting their servers"


def test_waiting_servers_take_a_replicas_block_only_when_no_replica_runs():
    all_refused = capacity_of("x", 2, (), {"x-gen-r000": QUOTA, "x-gen-r001": QUOTA})
    said = phase_of(PhaseFacts(stage=Stage.GENERATING, capacity=all_refused))
    assert said.reason == Reason.PODS_REFUSED
    assert said.message.startswith("0 of 2 generation pods exist, 0 scheduled, 0 ready; replica 0: PodsRefused: ")
    one_ready = capacity_of("x", 2, (PodState("p", 0, scheduled=True, ready=True),), {"x-gen-r001": QUOTA})
    assert phase_of(PhaseFacts(stage=Stage.GENERATING, capacity=one_ready)).reason == Reason.WAITING_FOR_SERVERS
    starting = capacity_of("x", 1, (PodState("p", 0, scheduled=True),), {})
    assert phase_of(PhaseFacts(stage=Stage.GENERATING, capacity=starting)).reason == Reason.WAITING_FOR_SERVERS
    ready = capacity_of("x", 1, (PodState("p", 0, scheduled=True, ready=True),), {})
    assert phase_of(PhaseFacts(stage=Stage.GENERATING, capacity=ready)).message == (
        "1 of 1 generation pods exist, 1 scheduled, 1 ready")
