"""A replica across two nodes (spec.server.nodesPerReplica: 2) on the real control plane: the Indexed
Job of two ranks on the two KWOK GPU nodes, the local kubelet running each rank's pod, the simulator
as SGLang's ranks (rank 0 serves, rank 1 joins it and follows: draftgen_simulator/ranks.py), and the
real `jobrunner generate` on rank 0. A rank lost mid-run restarts the whole group, which resumes from
its output: no sample lost or written twice, every budget exact (docs/multi-node.md)."""

from __future__ import annotations

import os
import random
import signal

import pytest

from draftgen_contracts import names
from jobrunner.shared.output import record_files
from tests.conftest import wait_for
from tests.scenarios import check_records_match_status


def two_node_run(run, budgets=(3000, 2000, 2000), **server):
    r = run(budgets=budgets)
    r.body["spec"]["server"].update(replicas=1, nodesPerReplica=2, tensorParallelSize=16, **server)
    return r


def rank_pods(r, replica: int = 0) -> dict[int, str]:
    """rank -> the name of its running pod (an Indexed Job's pods are named <job>-<index>-<suffix>)."""
    job = names.generation_job_name(r.name, replica)
    return {int(p.metadata.name[len(job) + 1:].split("-")[0]): p.metadata.name for p in r.pods_of_replica(replica)
            if p.status.phase in ("Pending", "Running") and p.metadata.deletion_timestamp is None}


def group_serving(r, replica: int = 0) -> bool:
    """Both ranks' pods Ready: every server up, the follower watching."""
    ready = [p for p in r.pods_of_replica(replica) if p.metadata.deletion_timestamp is None and any(
        c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
    return len(ready) == 2


def replica_status(r, replica: int = 0) -> dict:
    return next((s for s in r.status().get("replicas") or [] if s["index"] == replica), {})


def warnings(r, reason: str) -> list[str]:
    return [e.message for e in r.core.list_namespaced_event(
        r.namespace, field_selector=f"involvedObject.name={r.name},reason={reason}").items]


def test_a_replica_across_two_nodes_generates_through_its_leader_and_ends_as_one(run):
    r = two_node_run(run)
    r.apply()
    wait_for(lambda: len(replica_status(r).get("nodes") or []) == 2, 120, "both ranks on their nodes", r.cluster)
    nodes = replica_status(r)["nodes"]  # two GPU nodes of the cluster's, one a rank
    assert len(set(nodes)) == 2 and all(n.startswith("gpu-node-") for n in nodes), nodes
    job = r.jobs()[names.generation_job_name(r.name, 0)]
    assert (job.spec.completion_mode, job.spec.completions) == ("Indexed", 2)
    status = r.wait_phase("Succeeded", timeout_s=240)
    check_records_match_status(status, r.records())
    assert not warnings(r, "GroupRestarted") and replica_status(r).get("groupRestarts", 0) == 0


def bytes_on_disk(r) -> int:
    """What the run has written (its status shows the tokens a publish and a fold later, by when a
    short run may have ended, and a kill would come after it)."""
    return sum(os.path.getsize(f) for f in record_files(str(r.data / r.name)))


def kill_rank_and_check_the_group_restarts(r, rank: int, restart: int) -> None:
    """SIGKILL of `rank`'s SGLang (as by the OOM killer) once the group writes responses: the whole
    group restarts, said as restart `restart` of 6, and a new group of two pods runs."""
    written = bytes_on_disk(r)
    wait_for(lambda: group_serving(r) and bytes_on_disk(r) > written, 180, "the group generating", r.cluster)
    before = rank_pods(r)
    os.kill(r.process_of({before[rank]}, b"simulate"), signal.SIGKILL)
    wait_for(lambda: len(warnings(r, "GroupRestarted")) == restart, 120, f"the group restarted ({restart})",
             r.cluster)
    [said] = [w for w in warnings(r, "GroupRestarted") if f"restart {restart} of 6" in w]
    print(f"\nGroupRestarted: {said}")
    assert "replica 0: a rank of its 2-node group failed" in said
    wait_for(lambda: set(rank_pods(r).values()).isdisjoint(before.values()) and len(rank_pods(r)) == 2, 120,
             "a new group of two pods", r.cluster)


def test_a_worker_rank_then_the_leader_rank_killed_mid_run_each_restart_the_whole_group_which_resumes(run):
    """One run, two kills: a worker rank's server, then, once the new group writes, the leader rank's.
    Each restarts the whole group; the run ends exact, nothing lost or written twice."""
    r = two_node_run(run, budgets=(12000, 6000, 6000))
    r.apply()
    for restart, rank in enumerate((1, 0), start=1):  # the worker rank, then the leader rank
        kill_rank_and_check_the_group_restarts(r, rank, restart)
    status = r.wait_phase("Succeeded", timeout_s=300)
    check_records_match_status(status, r.records())
    assert replica_status(r)["groupRestarts"] == 2


@pytest.mark.slow
def test_ranks_killed_again_and_again_in_one_run_lose_nothing(run):
    """The soak variant: a random rank's server killed at each quarter of the tokens."""
    r = two_node_run(run, budgets=(12000, 6000, 6000))
    r.apply()
    rng = random.Random(45)
    for kill in range(1, 4):
        wait_for(lambda: group_serving(r) and (r.status().get("tokens") or 0) > kill * 5000, 300,
                 f"the group generating past {kill * 5000} tokens", r.cluster)
        os.kill(r.process_of({rank_pods(r)[rng.randrange(2)]}, b"simulate"), signal.SIGKILL)
        wait_for(lambda: len(warnings(r, "GroupRestarted")) == kill, 120, f"restart {kill}", r.cluster)
    status = r.wait_phase("Succeeded", timeout_s=300)
    check_records_match_status(status, r.records())
    assert replica_status(r)["groupRestarts"] == 3


def test_a_worker_that_cannot_resolve_its_leader_fails_its_group_saying_so_and_the_next_group_starts(run):
    r = two_node_run(run, startupTimeoutSeconds=60)
    # A Service of the ranks' name that selects no pod (a name taken by another tool): the leader's
    # name never resolves. The operator does not touch a Service it did not make.
    r.core.create_namespaced_service(r.namespace, {"metadata": {"name": names.ranks_service_name(r.name)}, "spec": {
        "clusterIP": "None", "selector": {"app": "someone-else"}}})
    r.apply()
    # Taken away once the group started: the operator makes its own with the next group's Job.
    wait_for(lambda: len(rank_pods(r)) == 2, 120, "the group's pods", r.cluster)
    r.core.delete_namespaced_service(names.ranks_service_name(r.name), r.namespace)
    wait_for(lambda: warnings(r, "GroupRestarted"), 150, "the group restarted", r.cluster)
    [said] = warnings(r, "GroupRestarted")
    print(f"\nGroupRestarted: {said}")
    assert f"{names.generation_job_name(r.name, 0)}-0.{r.name}-ranks did not resolve in 60 s" in said, said
    status = r.wait_phase("Succeeded", timeout_s=300)
    check_records_match_status(status, r.records())
