import pytest

from draftgen.observed import World
from draftgen.policies.capacity_policy import capacity_of
from draftgen.policies.failure_policy import failure_of, pods_refused_for_good, preflight_refused_for_good
from draftgen.reasons import Reason
from draftgen_contracts.states import Component, Stage
from draftgen_dev.builders import JobBuilder

PSA = 'pods "p" is forbidden: violates PodSecurity "restricted:latest": privileged'
QUOTA = 'pods "p" is forbidden: exceeded quota: gpus'


@pytest.mark.parametrize("jobs, reason, fragments", [
    ([JobBuilder("a-gen-r000", Component.GENERATE).active().state(),
      JobBuilder("a-merge", Component.MERGE).succeeded().state()], None, ()),
    ([JobBuilder("a-gen-r001", Component.GENERATE).failed("PodFailurePolicy", "Container generate exited with 2")
      .state()], Reason.GENERATION_JOB_FAILED, ("a-gen-r001", "PodFailurePolicy", "exited with 2")),
    ([JobBuilder("a-merge", Component.MERGE).failed().state()], Reason.MERGE_JOB_FAILED, ("BackoffLimitExceeded",)),
    ([JobBuilder("a-merge", Component.MERGE).failed().deleting().state()], None, ()),  # being deleted: does not count
    ([JobBuilder("a-odd", "other").failed("", "").state()], Reason.JOB_FAILED, ("Job a-odd failed (no reason given)",)),
])
def test_a_failed_job_names_its_stage_and_kubernetes_reason(jobs, reason, fragments):
    failure = failure_of(jobs)
    assert (failure and failure.reason) == reason
    assert all(f in failure.message for f in fragments)


def test_pods_pod_security_refuses_fail_the_run_and_a_quota_does_not():
    assert pods_refused_for_good(capacity_of("x", 1, (), {"x-gen-r000": PSA})) == (
        Reason.PODS_REFUSED, f"replica 0: {PSA}")
    assert pods_refused_for_good(capacity_of("x", 1, (), {"x-gen-r000": QUOTA})) is None
    assert pods_refused_for_good(None) is None


def test_the_preflights_pods_refused_for_good_fail_it_only_in_its_stage():
    world = World(refused_pods={"x-preflight": PSA})
    assert preflight_refused_for_good("x", Stage.PREFLIGHT, world) == (Reason.PODS_REFUSED, f"preflight: {PSA}")
    assert preflight_refused_for_good("x", Stage.GENERATING, world) is None
    assert preflight_refused_for_good("x", Stage.PREFLIGHT, World(refused_pods={"x-preflight": QUOTA})) is None
