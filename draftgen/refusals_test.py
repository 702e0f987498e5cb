from draftgen.api import DatasetGenerationStatus
from draftgen.conditions import ConditionType
from draftgen.policies.api_error_policy import ApiError
from draftgen.reasons import Reason
from draftgen.refusals import with_refusals
from draftgen_contracts.states import Phase

GENERATING = DatasetGenerationStatus(phase=Phase.GENERATING)


def conditions(status):
    return {c.type: c for c in status.conditions}


def test_an_invalid_child_fails_the_object_with_the_api_servers_words():
    invalid = ApiError("create", "Job", "x-gen-r000", 422, 'metadata.labels: Invalid value: "gpu batch"')
    status = with_refusals(GENERATING, [(invalid, 2.0)], "t", 1)
    failed = conditions(status)[ConditionType.FAILED]
    assert status.phase == Phase.FAILED and failed.status == "True" and failed.reason == Reason.CHILD_INVALID
    assert 'Invalid value: "gpu batch"' in failed.message and "x-gen-r000" in failed.message


def test_a_quota_keeps_the_phase_and_says_what_waits_and_until_when():
    quota = ApiError("create", "Job", "x-gen-r001", 403, "exceeded quota: gpus")
    status = with_refusals(GENERATING, [(quota, 8.0)], "t", 1)
    blocked = conditions(status)[ConditionType.BLOCKED]
    assert status.phase == Phase.GENERATING and blocked.status == "True" and blocked.reason == Reason.QUOTA_EXCEEDED
    assert "x-gen-r001" in blocked.message and "trying again in 8 s" in blocked.message
    healed = with_refusals(status, [], "t2", 1)
    assert conditions(healed)[ConditionType.BLOCKED].status == "False" and healed.phase == Phase.GENERATING


def test_a_permanent_refusal_fails_ready_and_progressing_too_and_clears_blocked():
    quota = ApiError("create", "Job", "x-gen-r001", 403, "exceeded quota: gpus")
    blocked = with_refusals(GENERATING, [(quota, 8.0)], "t", 1)
    invalid = ApiError("create", "Job", "x-gen-r000", 422, "bad label")
    status = with_refusals(blocked, [(quota, 4.0), (invalid, 2.0)], "t2", 1)
    said = {c.type: (c.status, c.reason) for c in status.conditions}
    assert said == {"Failed": ("True", Reason.CHILD_INVALID), "Ready": ("False", Reason.CHILD_INVALID),
                    "Progressing": ("False", Reason.CHILD_INVALID), "Blocked": ("False", Reason.NOT_BLOCKED)}
