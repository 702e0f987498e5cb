from draftgen.api import DatasetGenerationStatus
from draftgen.policies.api_error_policy import ApiError
from draftgen.refusals import with_refusals

GENERATING = DatasetGenerationStatus(phase="Generating")


def conditions(status):
    return {c.type: c for c in status.conditions}


def test_an_invalid_child_fails_the_object_with_the_api_servers_words():
    invalid = ApiError("create", "Job", "x-gen-r000", 422, 'metadata.labels: Invalid value: "gpu batch"')
    status = with_refusals(GENERATING, [(invalid, 2.0)], "t", 1)
    failed = conditions(status)["Failed"]
    assert status.phase == "Failed" and failed.status == "True" and failed.reason == "ChildInvalid"
    assert 'Invalid value: "gpu batch"' in failed.message and "x-gen-r000" in failed.message


def test_a_quota_keeps_the_phase_and_says_what_waits_and_until_when():
    quota = ApiError("create", "Job", "x-gen-r001", 403, "exceeded quota: gpus")
    status = with_refusals(GENERATING, [(quota, 8.0)], "t", 1)
    blocked = conditions(status)["Blocked"]
    assert status.phase == "Generating" and blocked.status == "True" and blocked.reason == "QuotaExceeded"
    assert "x-gen-r001" in blocked.message and "trying again in 8 s" in blocked.message
    healed = with_refusals(status, [], "t2", 1)
    assert conditions(healed)["Blocked"].status == "False" and healed.phase == "Generating"
