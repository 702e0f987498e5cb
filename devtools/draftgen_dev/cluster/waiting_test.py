import pytest
from kubernetes import client

from draftgen_dev.cluster.waiting import wait_until


def test_a_wait_asks_again_while_the_object_is_not_there_and_returns_its_answer():
    answers = iter([client.ApiException(status=404), None, "there"])

    def read():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert wait_until(read, 5, "the object", interval_s=0.01) == "there"


def test_a_wait_that_runs_out_names_what_it_waited_for_and_other_errors_are_raised():
    with pytest.raises(TimeoutError, match="the thing to appear"):
        wait_until(lambda: None, 0.3, "the thing to appear", interval_s=0.1)
    with pytest.raises(client.ApiException):
        wait_until(lambda: (_ for _ in ()).throw(client.ApiException(status=403)), 1, "x")
