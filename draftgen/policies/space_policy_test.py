from draftgen import reasons
from draftgen.observed import JobState
from draftgen.policies.failure_policy import failure_of
from draftgen.policies.retry_policy import after_exit
from draftgen.policies.space_policy import job_stopped_by_a_full_volume, retry_due
from draftgen_contracts import exit_codes


def exited(code: int, name: str = "qs-extract") -> JobState:
    decided = after_exit("extract", code, 0, 3)
    return JobState(name=name, component="extract", failed=decided.outcome == "failed", failure_reason=decided.reason,
                    failure_message=decided.message, failed_at="2026-12-07T00:00:00Z")


def test_a_full_volume_fails_the_job_at_once_by_the_second_rule_and_not_the_run():
    job = exited(exit_codes.VOLUME_FULL)
    assert job.failed and job.failure_reason == reasons.Reason.POD_FAILURE_POLICY
    assert "exit code 74 matching FailJob rule at index 1" in job.failure_message
    assert failure_of([job]) is None and job_stopped_by_a_full_volume([job]) == job
    bad_config = exited(exit_codes.BAD_CONFIG)
    assert failure_of([bad_config]) is not None and job_stopped_by_a_full_volume([bad_config]) is None


def test_its_job_is_replaced_once_the_wait_is_over():
    job = exited(exit_codes.VOLUME_FULL)
    assert not retry_due(job, "2026-12-07T00:04:59Z", 300)
    assert retry_due(job, "2026-12-07T00:05:00Z", 300)
