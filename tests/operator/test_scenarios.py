"""The shared scenarios (tests/scenarios.py) with the operator as the executor, on the real control
plane, the real `jobrunner generate` in the generation pods and the simulator as their sidecar."""

from __future__ import annotations

import os
import signal

import pytest
from kubernetes import client

from tests.conftest import wait_for
from tests.operator.conftest import Run
from tests.scenarios import SCENARIOS, Scenario, check, play, start


class ClusterDriver:
    def __init__(self, make_run):
        self.make_run = make_run
        self.r = None
        self.job_uids: set[str] = set()

    def apply(self, spec_change=None) -> None:
        if self.r is None or not self.r.applied:
            self.r = self.r or self.make_run()
            if spec_change is not None:
                spec_change(self.r.body["spec"])
            self.r.apply()
        else:
            self.r.patch_spec(spec_change)

    def wait_for_tokens(self) -> None:
        wait_for(lambda: (self.r.status().get("tokens") or 0) > 0, 120, "tokens in status", self.r.cluster)

    def restart_controller(self) -> None:
        self.job_uids = {j.metadata.uid for j in self.r.jobs().values()}
        self.r.operator.kill()
        self.r.operator.start(self.r.namespace)

    def wait_done(self) -> dict:
        def observed_and_done():
            obj = self.r.get()
            status = obj.get("status") or {}
            return (status.get("observedGeneration") == obj["metadata"]["generation"]
                    and status.get("phase") in ("Succeeded", "Failed"))
        wait_for(observed_and_done, 240, "the phase Succeeded or Failed", self.r.cluster, interval_s=0.5)
        status = self.r.status()
        # kopf posts events from a queue of its own, after the status patch: the final one a moment later.
        shown = {c["type"]: c for c in status["conditions"]}["Failed" if status["phase"] == "Failed" else "Ready"]
        wait_for(lambda: shown["reason"] in self.r.events(), 30, f"the event {shown['reason']}", self.r.cluster)
        return status

    def events(self) -> list[str]:
        return self.r.events()

    def records(self) -> list[dict]:
        return self.r.records()

    def applied_spec(self) -> dict:
        return self.r.get()["spec"]

    def volumes(self):
        if self.r is None:
            self.r = self.make_run()
        return self.r.data, self.r.models


# Found by the preflight before any server starts: played side by side, one namespace, one operator.
PREFLIGHT_FAILURES = [s for s in SCENARIOS if s.reason == "PreflightFailed"]
ALONE = [s for s in SCENARIOS if s not in PREFLIGHT_FAILURES]


@pytest.fixture(scope="module")
def side_by_side(cluster, crd, module_namespace, tiny_model, tmp_path_factory, request):
    """Each preflight failure as an object of its own in one namespace, watched by one operator and
    applied together: each is checked alone, so none may show another's failure."""
    api = cluster.api_client()
    first = Run(cluster, api, module_namespace, tiny_model, tmp_path_factory.mktemp("preflight-failures"),
                name="pf-0")
    runs = [first, *(Run(cluster, api, module_namespace, tiny_model, None, name=f"pf-{i}", beside=first)
                     for i in range(1, len(PREFLIGHT_FAILURES)))]
    drivers = {}
    for scenario, r in zip(PREFLIGHT_FAILURES, runs):
        drivers[scenario.name] = ClusterDriver(lambda r=r: r)
        start(scenario, drivers[scenario.name])
    yield drivers
    first.stop(request.session.testsfailed > 0, "preflight-failures")
    api.close()


@pytest.mark.parametrize("scenario", PREFLIGHT_FAILURES, ids=[s.name for s in PREFLIGHT_FAILURES])
def test_a_preflight_failure_beside_the_others(scenario, side_by_side):
    driver = side_by_side[scenario.name]
    check(scenario, driver.wait_done(), driver)


@pytest.mark.parametrize("scenario", ALONE, ids=[s.name for s in ALONE])
def test_scenario(scenario, run):
    driver = ClusterDriver(run)
    play(scenario, driver)
    if scenario.restart:  # the restarted operator adopted the Jobs it found instead of creating them again
        log = driver.r.operator.log.read_text()
        assert all(log.count(f"created Job {driver.r.namespace}/{name}") == 1 for name in driver.r.jobs())


def test_a_replica_evicted_and_the_other_killed_mid_run_each_resume_their_share_and_every_budget_holds(run):
    """Replica 0's pod evicted through the Eviction API (what `kubectl drain` does): generate stops on
    SIGTERM with rows left and exits 143, not 0, so the pod fails (DisruptionTarget: the Job's
    podFailurePolicy ignores it) and the Job makes a new one; had it exited 0 the Job would be
    Complete and the replica's share never generated. Then SIGKILL of replica 1's generate process
    (a crash, not a deletion): its pod fails, the Job makes a new one. Each new pod resumes its
    replica's share from its part files; the other replica never spends it, and every dataset still
    ends within the bound."""
    scenario = Scenario("a replica evicted, the other killed", budgets=(4000, 2000, 2000))
    driver = ClusterDriver(run)

    def slower(spec):  # a quarter of the quickstart's speed: both stops land with most of the run left
        args = spec["server"]["args"]
        args[args.index("--per-request-tps") + 1] = "25"
        for d, b in zip(spec["datasets"], scenario.budgets):
            d.update(budgetTokens=b)
    driver.apply(slower)
    r = driver.r
    wait_for(lambda: r.replica_tokens(0) > 0 and r.replica_tokens(1) > 0, 120, "both replicas to report tokens",
             r.cluster)
    assert (r.status().get("tokens") or 0) < sum(scenario.budgets) / 2, "the run is too far on to stop it"
    evicted = {p.metadata.name for p in r.pods_of_replica(0)}
    for name in evicted:
        r.core.create_namespaced_pod_eviction(name, r.namespace, client.V1Eviction(
            metadata=client.V1ObjectMeta(name=name, namespace=r.namespace)))
    killed = {p.metadata.name for p in r.pods_of_replica(1)}
    os.kill(r.generate_pid(1), signal.SIGKILL)
    # Each Job runs its replica again in a new pod (restartPolicy Never), which resumes its share.
    for replica, gone in ((0, evicted), (1, killed)):
        wait_for(lambda: any(p.metadata.name not in gone for p in r.pods_of_replica(replica)), 120,
                 f"a new pod of replica {replica}", r.cluster)
    status = driver.wait_done()
    check(scenario, status, driver)
    assert "StoppedShort" not in driver.events()  # the evicted pod failed: no Job completed short
