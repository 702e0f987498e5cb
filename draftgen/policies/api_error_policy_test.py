import pytest

from draftgen.policies.api_error_policy import ApiError, backoff_s, is_permanent, reason_of
from draftgen.reasons import Reason


def error(status, message="") -> ApiError:
    return ApiError("create", "Job", "x-gen-r000", status, message)


@pytest.mark.parametrize("status,message,permanent,reason", [
    (422, 'Job.batch "x" is invalid: metadata.labels: Invalid value: "gpu batch"', True, Reason.CHILD_INVALID),
    (400, "bad request", True, Reason.CHILD_INVALID),
    (403, 'admission webhook "vjob.kb.io" denied the request: nope', True, Reason.ADMISSION_DENIED),
    (403, 'jobs "x" is forbidden: exceeded quota: gpus, requested: nvidia.com/gpu=8', False, Reason.QUOTA_EXCEEDED),
    (403, 'jobs.batch is forbidden: User "system:serviceaccount:ns:op" cannot create resource "jobs"', False,
     Reason.FORBIDDEN),
    (409, "the object has been modified", False, Reason.CONFLICT),
    (429, "too many requests", False, Reason.THROTTLED),
    (503, "etcdserver: leader changed", False, Reason.API_UNAVAILABLE),
    (0, "connection refused", False, Reason.API_UNAVAILABLE),
])
def test_what_can_never_succeed_is_permanent_and_the_rest_is_waited_out(status, message, permanent, reason):
    assert is_permanent(error(status, message)) is permanent
    assert reason_of(error(status, message)) == reason


def test_backoff_doubles_up_to_a_minute():
    assert [backoff_s(n) for n in (1, 2, 3, 4, 10)] == [2, 4, 8, 16, 60]


def test_what_a_refusal_says_names_the_child_and_quotes_the_server():
    assert error(422, "bad label").says() == "create Job x-gen-r000: HTTP 422: bad label"
    assert error(0, "connection refused").says() == "create Job x-gen-r000: no answer: connection refused"
