"""draftgen behind a real Kueue (v0.19.2, devtools/draftgen_dev/cluster/kueue.py) on the local control
plane: a ClusterQueue with one replica's worth of GPUs (8), a LocalQueue in the test's namespace.
Every Job of a run carries the queue label; Kueue's webhook suspends it and Kueue admits it."""

from __future__ import annotations

import copy
import time

import pytest
from kubernetes import client

from draftgen.policies.failure_policy import STAGE_REASONS
from draftgen_contracts import names
from draftgen_dev.cluster.controlplane import LOCAL_KUBELET_LABEL
from draftgen_dev.cluster.kueue import LocalKueue
from tests.conftest import wait_for
from tests.scenarios import check_records_match_status

# Kueue's Job webhook (failurePolicy Fail) sees every Job of the cluster while it runs: the other
# tests' Jobs wait outside until this module ends.
pytestmark = pytest.mark.cluster_alone

QUEUE = "gpu-batch"
WORKLOADS = ("kueue.x-k8s.io", "v1beta2")


@pytest.fixture(scope="module")
def kueue(cluster):
    with LocalKueue(cluster) as k:
        k.create_cluster_queue(gpus=8)
        k.create_priority_class("urgent", 1000)
        yield k


@pytest.fixture
def queued(kueue, run):
    """`run` with one 8-GPU replica per object, its GPU and CPU Jobs queued in a LocalQueue of the
    test's namespace (one flavor here, with CPU quota to spare)."""
    def make(**kwargs):
        r = run(queueName=QUEUE, **kwargs)
        r.body["spec"]["server"]["replicas"] = 1
        r.body["spec"].setdefault("cpuStages", {})["queueName"] = QUEUE
        kueue.create_local_queue(r.namespace, QUEUE)
        return r
    return make


def ready(status: dict) -> dict:
    return {c["type"]: c for c in status.get("conditions") or []}.get("Ready") or {}


def workloads(r) -> dict[str, dict]:
    """The namespace's Kueue Workloads by the name of the Job they stand for."""
    items = r.custom.list_namespaced_custom_object(*WORKLOADS, r.namespace, "workloads")["items"]
    return {w["metadata"]["ownerReferences"][0]["name"]: w for w in items}


def never_updated_by_its_creator(job: client.V1Job) -> bool:
    """The operator creates Jobs and never updates them: spec.suspend is Kueue's alone (kueue#1726).
    A create is recorded in managedFields as an Update by its manager, first; Kueue's admission
    (suspend false) is a later Update by Kueue's manager."""
    fields = job.metadata.managed_fields or []
    creator = fields[0].manager if fields else None
    return bool(fields) and not [f for f in fields[1:] if f.manager == creator and f.operation == "Update"
                                 and not f.subresource]


def test_a_second_run_waits_in_kueue_until_the_first_frees_its_gpus(queued):
    # The first holds its GPUs long enough (a slower server) for the second to pass its preflight
    # and be seen waiting.
    first = queued(name="first", budgets=(16000, 6000, 6000))
    args = first.body["spec"]["server"]["args"]
    args[args.index("--per-request-tps") + 1] = "60"
    first.apply()
    second_body = copy.deepcopy(first.body)
    second_body["metadata"]["name"] = "second"
    second_body["spec"]["server"]["args"][args.index("--per-request-tps") + 1] = "400"
    for dataset, budget in zip(second_body["spec"]["datasets"], (3000, 2000, 2000)):
        dataset["budgetTokens"] = budget
    first.wait_phase("Generating", timeout_s=120)
    first.custom.create_namespaced_custom_object(names.GROUP, names.VERSION, first.namespace, names.PLURAL, second_body)
    read_second = lambda: first.custom.get_namespaced_custom_object(  # noqa: E731
        names.GROUP, names.VERSION, first.namespace, names.PLURAL, "second").get("status") or {}

    def second_queued():
        said = ready(read_second())
        return said.get("reason") == "Queued" and "insufficient unused quota for nvidia.com/gpu" in said["message"]
    try:
        wait_for(second_queued, 60, "the second run queued in Kueue", first.cluster, interval_s=0.5)
    except AssertionError as e:
        raise AssertionError(f"{e}: its Ready {ready(read_second())}, the first's stage "
                             f"{first.status().get('stage')}") from None
    assert first.status().get("stage") == "Generating"
    message = ready(read_second())["message"]
    assert f"its Job second-gen-r000 is queued in Kueue LocalQueue {QUEUE} since 20" in message, message
    assert read_second()["phase"] == "Pending"

    # The first meets its budgets: its generation Job goes, the quota frees, the second is admitted.
    wait_for(lambda: first.status().get("stage") != "Generating", 240, "the first run's budgets", first.cluster)
    budget_met = time.monotonic()

    def second_running():
        pods = first.core.list_namespaced_pod(first.namespace, label_selector=f"{names.LABEL_NAME}=second").items
        return any(p.status.phase == "Running" for p in pods)
    wait_for(second_running, 120, "the second run's pod running", first.cluster, interval_s=0.2)
    print(f"\nfirst run's budgets met -> second run's pod running: {time.monotonic() - budget_met:.1f} s")

    first.wait_phase("Succeeded", timeout_s=240)
    wait_for(lambda: read_second().get("phase") == "Succeeded", 300, "the second run to succeed", first.cluster)
    check_records_match_status(first.status(), first.records())
    # The CPU Jobs are queued in cpuStages.queueName: Kueue made a Workload for each merge and admitted
    # it (the generation Jobs' Workloads went with their Jobs).
    merges = {job: w for job, w in workloads(first).items() if job in ("first-merge", "second-merge")}
    assert len(merges) == 2
    for w in merges.values():
        assert {c["type"]: c["status"] for c in w["status"]["conditions"]}["Admitted"] == "True"


def test_a_run_suspended_by_its_user_then_preempted_by_kueue_resumes_each_time_and_loses_nothing(queued):
    """Two stops of one run behind Kueue. The user's: spec.suspend deletes the Jobs (the operator never
    writes a Job's spec.suspend, Kueue's alone: kueue#1726), false creates them again. Kueue's: a
    higher-priority workload preempts the run (its Job suspended, not failed); readmitted, the new pod
    resumes. Each time every record is kept, none twice, and no failure is counted."""
    r = queued(budgets=(12000, 4000, 4000))
    r.apply()
    wait_for(lambda: (r.status().get("tokens") or 0) > 1000, 180, "some tokens", r.cluster)
    job = r.jobs()["qs-gen-r000"]
    assert job.metadata.labels[names.KUEUE_QUEUE_LABEL] == QUEUE and never_updated_by_its_creator(job)
    r.patch_spec(lambda spec: spec.update(suspend=True))
    r.wait_phase("Suspended")
    wait_for(lambda: not r.unfinished_jobs() and not r.pods(), 60, "Jobs and pods gone", r.cluster)
    kept = len(r.records())
    r.patch_spec(lambda spec: spec.update(suspend=False))
    wait_for(lambda: len(r.records()) > kept, 180, "records again after the resume", r.cluster)

    # A higher-priority workload wants the same 8 GPUs, and holds them for a while.
    urgent = {"metadata": {"name": "urgent", "labels": {names.KUEUE_QUEUE_LABEL: QUEUE,
                                                        "kueue.x-k8s.io/priority-class": "urgent"}},
              "spec": {"template": {"metadata": {"labels": {LOCAL_KUBELET_LABEL: "true"}}, "spec": {
                  "restartPolicy": "Never", "nodeSelector": {"nvidia.com/gpu.present": "true"},
                  "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                  "containers": [{"name": "c", "image": "local", "command": ["sleep", "15"],
                                  "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}
    r.batch.create_namespaced_job(r.namespace, urgent)

    def preempted():
        capacity = {c["type"]: c for c in r.status().get("conditions") or []}.get("Capacity") or {}
        return capacity.get("reason") == "Queued" and "Preempted" in capacity.get("message", "")
    wait_for(preempted, 90, "the run preempted and queued again", r.cluster, interval_s=0.5)
    tokens_at_preemption = r.status()["tokens"]
    assert r.status()["phase"] in ("Generating", "Pending")

    def readmitted():
        job = r.jobs().get("qs-gen-r000")
        return job is not None and not job.spec.suspend and job.status.active and job
    job = wait_for(readmitted, 120, "the run readmitted", r.cluster, interval_s=0.5)
    assert not job.status.failed, "a preemption is not a failed pod"

    status = r.wait_phase("Succeeded", "Failed", timeout_s=300)
    assert status["phase"] == "Succeeded", status["conditions"]
    assert status["tokens"] >= tokens_at_preemption and len(r.records()) >= kept
    check_records_match_status(status, r.records())  # nothing lost, nothing twice
    # Not a failure: no failure event (failure_policy's reasons), and the readmitted Job counts no failed pod.
    assert not {*STAGE_REASONS.values(), "JobFailed"} & set(r.events())
    assert r.batch.read_namespaced_job("urgent", r.namespace).status.succeeded == 1


def test_a_replica_across_two_nodes_is_admitted_whole_or_not_at_all(kueue, run):
    """A ClusterQueue with room for one node's GPUs never starts half of a two-node replica: Kueue
    admits the Job's pods as one Workload. Given room for both, both start, and the run succeeds."""
    kueue.create_cluster_queue(name="one-node", gpus=8, preemption=False)
    r = run(queueName="groups", budgets=(3000, 2000, 2000))
    r.body["spec"]["server"].update(replicas=1, nodesPerReplica=2, tensorParallelSize=16)
    kueue.create_local_queue(r.namespace, "groups", cluster_queue="one-node")
    r.apply()

    def queued():
        said = ready(r.status())
        return said.get("reason") == "Queued" and "nvidia.com/gpu" in said.get("message", "")
    wait_for(queued, 120, "the group queued in Kueue", r.cluster, interval_s=0.5)
    workload = workloads(r)[names.generation_job_name(r.name, 0)]
    assert [p["count"] for p in workload["spec"]["podSets"]] == [2]  # one Workload of both ranks
    time.sleep(5)  # Kueue has seen it and keeps it: no rank starts alone
    assert not r.pods() and r.jobs()[names.generation_job_name(r.name, 0)].spec.suspend
    kueue.set_gpu_quota(16, name="one-node")
    wait_for(lambda: len(r.pods()) == 2, 120, "both ranks admitted together", r.cluster, interval_s=0.5)
    status = r.wait_phase("Succeeded", timeout_s=240)
    check_records_match_status(status, r.records())
