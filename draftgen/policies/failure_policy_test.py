from draftgen.observed import JobState
from draftgen.policies.failure_policy import failure_of


def test_no_failed_job_is_no_failure():
    assert failure_of([JobState("a-gen-r000", "generate", active=1), JobState("a-merge", "merge", succeeded=True)]) is None


def test_a_failed_job_names_stage_and_kubernetes_reason():
    reason, message = failure_of([JobState("a-gen-r001", "generate", failed=True, failure_reason="PodFailurePolicy",
                                           failure_message="Container generate exited with 2")])
    assert reason == "GenerationJobFailed"
    assert "a-gen-r001" in message and "PodFailurePolicy" in message and "exited with 2" in message


def test_a_failed_job_being_deleted_does_not_count():
    assert failure_of([JobState("a-merge", "merge", failed=True, deleting=True)]) is None
