import pytest

from draftgen.policies.failure_policy import failure_of
from draftgen_dev.builders import JobBuilder


@pytest.mark.parametrize("jobs, reason, fragments", [
    ([JobBuilder("a-gen-r000", "generate").active().state(), JobBuilder("a-merge", "merge").succeeded().state()],
     None, ()),
    ([JobBuilder("a-gen-r001", "generate").failed("PodFailurePolicy", "Container generate exited with 2").state()],
     "GenerationJobFailed", ("a-gen-r001", "PodFailurePolicy", "exited with 2")),
    ([JobBuilder("a-merge", "merge").failed().state()], "MergeJobFailed", ("BackoffLimitExceeded",)),
    ([JobBuilder("a-merge", "merge").failed().deleting().state()], None, ()),  # being deleted: does not count
])
def test_a_failed_job_names_its_stage_and_kubernetes_reason(jobs, reason, fragments):
    failure = failure_of(jobs)
    assert (failure and failure[0]) == reason
    assert all(f in failure[1] for f in fragments)
