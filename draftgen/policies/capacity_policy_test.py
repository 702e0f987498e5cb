from dataclasses import replace

from draftgen.observed import PodState, job_state_from, pod_state_from
from draftgen.policies.capacity_policy import capacity_of, job_queued
from draftgen.reasons import Reason

QUOTA = 'pods "x-gen-r001-abc" is forbidden: exceeded quota: gpus, requested: nvidia.com/gpu=8, used: 8, limited: 8'
PSA = 'pods "x-gen-r000-abc" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true'


def test_every_replica_not_ready_is_explained_by_the_clusters_own_words():
    pods = (PodState("x-gen-r000-a", 0, scheduled=True, ready=True),)
    cap = capacity_of("x", 2, pods, {"x-gen-r001": QUOTA})
    assert (cap.requested, cap.pods, cap.scheduled, cap.ready) == (2, 1, 1, 1)
    [wait] = cap.waits
    assert wait.replica == 1 and wait.reason == Reason.PODS_REFUSED and "exceeded quota" in wait.message
    assert not wait.permanent  # a quota may free up
    assert cap.counts() == "1 of 2 generation pods exist, 1 scheduled, 1 ready"


def test_pod_security_refusals_are_for_good():
    [wait] = capacity_of("x", 1, (), {"x-gen-r000": PSA}).waits
    assert wait.permanent and "restricted" in wait.message


def test_a_pod_that_exists_says_what_it_waits_for():
    unschedulable = PodState("p", 0, problem_reason="Unschedulable",
                             problem_message="0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
    starting = PodState("q", 1, scheduled=True)
    waits = capacity_of("x", 2, (unschedulable, starting), {}).waits
    assert [(w.reason, w.message) for w in waits] == [
        ("Unschedulable", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."),
        (Reason.STARTING, "its server is loading the model")]


def test_a_replica_waiting_only_for_time_says_how_far_its_start_is():
    waits = capacity_of("x", 3, (PodState("p", 1), PodState("q", 2, scheduled=True)), {}).waits
    assert [(w.reason, w.message) for w in waits] == [
        (Reason.STARTING, "its pod is being created"), (Reason.STARTING, "its pod waits for the scheduler"),
        (Reason.STARTING, "its server is loading the model")]
    assert capacity_of("x", 3, (), {}).first_block() is None  # time alone blocks nothing


def test_pod_state_reads_the_scheduler_and_the_kubelet():
    pending = pod_state_from({"metadata": {"name": "p", "labels": {"draftgen.io/replica": "1"}},
                              "status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                                         "reason": "Unschedulable", "message": "no GPU"}]}})
    assert (pending.replica, pending.scheduled, pending.problem_reason, pending.problem_message) == (
        1, False, "Unschedulable", "no GPU")
    pulling = pod_state_from({"metadata": {"name": "q"}, "status": {
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "initContainerStatuses": [{"name": "sglang", "state": {"waiting": {
            "reason": "ImagePullBackOff", "message": 'Back-off pulling image "sglang:nope"'}}}]}})
    assert pulling.scheduled and pulling.problem_reason == "ImagePullBackOff"
    assert pulling.problem_message == 'container sglang: Back-off pulling image "sglang:nope"'
    crashing = pod_state_from({"metadata": {"name": "r"}, "status": {
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "initContainerStatuses": [{"name": "sglang", "restartCount": 2,
                                   "lastState": {"terminated": {"exitCode": 2}},
                                   "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}}}]}})
    assert crashing.problem_message == "container sglang: back-off 20s (restarted 2 times, last exit code 2)"


def test_a_job_waiting_in_a_queue_says_so_not_that_its_pod_is_coming():
    job = job_state_from({"metadata": {"name": "x-gen-r000", "creationTimestamp": "2026-12-01T10:00:00Z",
                                       "labels": {"kueue.x-k8s.io/queue-name": "gpu-batch"}},
                          "spec": {"suspend": True},
                          "status": {"conditions": [{"type": "Suspended", "status": "True",
                                                     "lastTransitionTime": "2026-12-01T10:00:01Z"}]}})
    kueue = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu"
    [wait] = capacity_of("x", 1, (), {}, {job.name: job}, {job.name: kueue}).waits
    assert wait.reason == Reason.QUEUED and not wait.permanent
    assert wait.message == ("its Job x-gen-r000 is queued in Kueue LocalQueue gpu-batch since 2026-12-01T10:00:01Z: "
                            + kueue)
    unqueued = replace(job, queue="")
    assert job_queued(unqueued) == (Reason.QUEUED, "its Job x-gen-r000 is suspended since 2026-12-01T10:00:01Z until a queue admits it")
