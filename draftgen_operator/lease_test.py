from draftgen_operator.lease import Timing, has_lost, may_take


def test_a_lease_is_free_without_a_holder_to_its_holder_and_once_unchanged_for_its_duration():
    assert may_take(None, "me", 0.0, 15.0) and may_take("", "me", 0.0, 15.0)
    assert may_take("me", "me", 0.0, 15.0)
    assert not may_take("other", "me", 14.9, 15.0)
    assert may_take("other", "me", 15.0, 15.0)


def test_the_holder_gives_up_at_the_renew_deadline():
    assert not has_lost(9.9, 10.0) and has_lost(10.0, 10.0)


def test_timings_that_could_let_two_holders_overlap_are_refused():
    assert Timing().problem() is None
    assert "under the lease duration" in Timing(duration_s=10, renew_deadline_s=9, retry_s=1).problem()
    assert "positive" in Timing(retry_s=0).problem()


def test_a_leader_whose_api_calls_hang_gives_up_by_its_deadline_before_the_lease_can_be_taken():
    """Each API call waits out its whole time-out (a half-open connection): the leader must still
    stop within renew deadline + retry, under the lease duration."""
    import threading
    import time

    from kubernetes import client

    from draftgen_operator.lease import Elector

    class Hanging:
        def read_namespaced_lease(self, name, namespace, _request_timeout):
            time.sleep(_request_timeout)
            raise TimeoutError("read timed out")

    timing = Timing(duration_s=1.0, renew_deadline_s=0.6, retry_s=0.2)
    elector = Elector(client.ApiClient(), "ns", "lease", "me", timing)
    elector.api = Hanging()
    elector.renewed_at = time.monotonic()  # it had just renewed
    lost = threading.Event()
    elector.keep(on_lost=lost.set, stop=threading.Event())
    assert lost.wait(timing.duration_s)  # before a standby could take the lease
    assert time.monotonic() - elector.renewed_at >= timing.renew_deadline_s


def test_the_lease_counts_from_before_the_write_not_from_its_late_answer():
    from types import SimpleNamespace

    from kubernetes import client

    from draftgen_operator.lease import Elector

    clock = [100.0]

    class SlowAnswer:
        def read_namespaced_lease(self, name, namespace, _request_timeout):
            return SimpleNamespace(spec=SimpleNamespace(holder_identity="me", renew_time=None, acquire_time=None,
                                                        lease_transitions=0),
                                   metadata=SimpleNamespace(resource_version="1"))

        def replace_namespaced_lease(self, name, namespace, body, _request_timeout):
            clock[0] += 1.5  # the write landed at once; its answer took 1.5 s to come back

    elector = Elector(client.ApiClient(), "ns", "lease", "me", Timing(), clock=lambda: clock[0])
    elector.api = SlowAnswer()
    assert elector.try_once()
    assert elector.renewed_at == 100.0
