import pytest

from draftgen.conditions import (ConditionType, condition, set_blocked, set_budgets_reachable, set_capacity,
                                 set_condition, set_failed, set_progressing, set_ready, set_succeeded, set_suspended)
from draftgen.observed import PodState
from draftgen.policies.capacity_policy import capacity_of
from draftgen.policies.phase_policy import ShownPhase
from draftgen.reasons import Explanation, Reason
from draftgen_contracts.states import Phase

SETTERS = (set_ready, set_progressing, set_succeeded, set_failed, set_suspended)


def said(shown: ShownPhase) -> dict[str, tuple[str, str, str]]:
    c = []
    for setter in SETTERS:
        c = setter(c, shown, "t", 1)
    return {x.type: (x.status, x.reason, x.message) for x in c}


def test_a_transition_time_moves_only_when_the_status_does():
    c = set_condition([], ConditionType.READY, False, "A", "a", "t1", 1)
    c = set_condition(c, ConditionType.READY, False, "B", "b", "t2", 2)
    assert (c[0].last_transition_time, c[0].reason, c[0].observed_generation) == ("t1", "B", 2)
    c = set_condition(c, ConditionType.READY, True, "C", "c", "t3", 2)
    assert c[0].last_transition_time == "t3" and len(c) == 1


def test_succeeded_is_ready_and_neither_progressing_nor_failed():
    assert said(ShownPhase(Phase.SUCCEEDED, Reason.SUCCEEDED, "corpus ready")) == {
        "Ready": ("True", "Succeeded", "corpus ready"), "Progressing": ("False", "Succeeded", "corpus ready"),
        "Succeeded": ("True", "Succeeded", "corpus ready"), "Failed": ("False", "NotFailed", ""),
        "Suspended": ("False", "NotSuspended", "")}


def test_a_failure_says_its_reason_on_ready_progressing_and_failed():
    assert said(ShownPhase(Phase.FAILED, Reason.MERGE_JOB_FAILED, "Job x-merge failed")) == {
        "Ready": ("False", "MergeJobFailed", "Job x-merge failed"),
        "Progressing": ("False", "MergeJobFailed", "Job x-merge failed"),
        "Succeeded": ("False", "MergeJobFailed", ""), "Failed": ("True", "MergeJobFailed", "Job x-merge failed"),
        "Suspended": ("False", "NotSuspended", "")}


def test_suspension_says_so_and_does_not_progress():
    conditions = said(ShownPhase(Phase.SUSPENDED, Reason.SUSPENDED, "spec.suspend is true"))
    assert conditions["Suspended"] == ("True", "Suspended", "spec.suspend is true")
    assert conditions["Progressing"][0] == "False" and conditions["Failed"] == ("False", "NotFailed", "")


@pytest.mark.parametrize("phase, reason, progressing", [
    (Phase.PENDING, Reason.WAITING_FOR_SERVERS, "True"),
    (Phase.GENERATING, Reason.GENERATING, "True"),
    (Phase.MERGING, Reason.QUEUED, "True"),
    (Phase.EXTRACTING, Reason.EXTRACTING, "True"),
    (Phase.PENDING, Reason.VOLUME_MISSING, "False"),  # waits for the user, not for the cluster
    (Phase.PENDING, Reason.OUTPUT_IN_USE, "False"),
])
def test_progressing_is_true_while_a_stage_moves_on_its_own(phase, reason, progressing):
    assert said(ShownPhase(phase, reason, "m"))["Progressing"][0] == progressing


def test_budgets_reachable_says_what_falls_short():
    short = set_budgets_reachable([], "a: it will be Exhausted at about 60 tokens", "t", 1)
    assert [(x.status, x.reason, x.message) for x in short] == [
        ("False", "BudgetOutOfReach", "a: it will be Exhausted at about 60 tokens")]
    [enough] = set_budgets_reachable(short, None, "t", 1)
    assert (enough.status, enough.reason, enough.message) == (
        "True", "RowsSuffice", "every dataset's usable rows may reach its budget")


def test_capacity_names_the_first_block_and_goes_when_no_replica_should_run():
    pods = (PodState("p0", 0, scheduled=True), PodState("p1", 1, problem_reason="Unschedulable", problem_message="no"))
    [c] = set_capacity([], capacity_of("x", 2, pods, {}), "t", 1)
    assert (c.status, c.reason) == ("False", "Unschedulable")  # a block before a replica's own start
    assert c.message == ("0 of 2 generation replicas ready; replica 0: Starting: its server is loading the model; "
                         "replica 1: Unschedulable: no")
    ready = set_capacity([c], capacity_of("x", 1, (PodState("p0", 0, scheduled=True, ready=True),), {}), "t", 1)
    assert [(x.status, x.reason, x.message) for x in ready] == [("True", "AllReplicasReady",
                                                                "1 of 1 generation replicas ready")]
    assert set_capacity(ready, None, "t", 1) == []


def test_blocked_says_the_refusal_and_clears():
    c = set_blocked([], Explanation(Reason.QUOTA_EXCEEDED, "create Job j: HTTP 403"), "t", 1)
    assert (condition(c, ConditionType.BLOCKED).status, c[0].reason) == ("True", "QuotaExceeded")
    [cleared] = set_blocked(c, None, "t2", 1)
    assert (cleared.status, cleared.reason, cleared.message) == ("False", "NotBlocked", "")
