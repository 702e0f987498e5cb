import pytest

from draftgen.policies.retry_policy import after_exit
from draftgen.reasons import Reason
from draftgen_contracts import exit_codes


@pytest.mark.parametrize("exit_code, failed_before, limit, outcome, reason", [
    (exit_codes.OK, 0, 6, "succeeded", ""),
    (exit_codes.OK, 5, 6, "succeeded", ""),
    (exit_codes.BAD_CONFIG, 0, 6, "failed", Reason.POD_FAILURE_POLICY),  # retrying a bad config cannot help
    (exit_codes.RETRY_LATER, 0, 6, "restart", ""),
    (exit_codes.FAILED, 5, 6, "restart", ""),  # the 6th failed pod: still within backoffLimit 6
    (exit_codes.FAILED, 6, 6, "failed", Reason.BACKOFF_LIMIT_EXCEEDED),  # the 7th
    (exit_codes.RETRY_LATER, 3, 3, "failed", Reason.BACKOFF_LIMIT_EXCEEDED),
    (-9, 0, 0, "failed", Reason.BACKOFF_LIMIT_EXCEEDED),  # killed, and no retry allowed
])
def test_a_pods_exit_decides_the_job_as_kubernetes_would(exit_code, failed_before, limit, outcome, reason):
    decided = after_exit("generate", exit_code, failed_before, limit)
    assert (decided.outcome, decided.reason) == (outcome, reason)


def test_a_failjob_exit_says_which_container_and_code():
    assert "Container merge" in after_exit("merge", 2, 0, 3).message and "exit code 2" in after_exit("merge", 2, 0, 3).message
