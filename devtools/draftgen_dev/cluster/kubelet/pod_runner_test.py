from draftgen_dev.cluster.kubelet.pod_runner import back_off_s, restarts


def test_a_deployments_container_is_restarted_whatever_its_exit():
    assert restarts("Always", 0) and restarts("Always", 1) and restarts(None, 137)


def test_a_jobs_container_is_restarted_only_on_failure_or_never():
    assert restarts("OnFailure", 2) and not restarts("OnFailure", 0)
    assert not restarts("Never", 1) and not restarts("Never", 0)


def test_the_back_off_doubles_from_ten_seconds_to_five_minutes():
    assert [back_off_s(n) for n in (1, 2, 3, 6, 7, 20)] == [10, 20, 40, 300, 300, 300]
