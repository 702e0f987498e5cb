"""Capacity policy: how many generation replicas run, and why the others do not, from what the
operator sees of their Jobs and pods; what `WaitingForServers` and `Capacity` then say.

A replica runs when its pod is Ready (its server passed the startup probe). One that does not is
explained by the first of: its Job suspended (queued in Kueue), its Job's pods refused at creation (the Job's FailedCreate event: a
ResourceQuota, Pod Security admission), its pod unschedulable (the scheduler's message), a
container that cannot start (image pull, crash loop: the kubelet's words), or its server still
starting. Pod Security refusals are permanent (the namespace's policy forbids the pod the spec
asks for); the rest may clear and are waited for.
"""

from __future__ import annotations

from dataclasses import dataclass

from draftgen_contracts import names

from .. import reasons
from ..observed import JobState, PodState
from ..reasons import Explanation, Reason

PERMANENT_REFUSALS = ("violates PodSecurity",)


def refused_for_good(message: str) -> bool:
    """Whether a refusal of a Job's pods will come again whatever the wait (a namespace's policy)."""
    return any(p in message for p in PERMANENT_REFUSALS)


@dataclass(frozen=True)
class ReplicaWait:
    replica: int
    reason: str  # a Reason (Queued, PodsRefused, Starting), or Kubernetes' own (Unschedulable, ErrImagePull, ...)
    message: str

    @property
    def permanent(self) -> bool:
        return self.reason == Reason.PODS_REFUSED and refused_for_good(self.message)


@dataclass(frozen=True)
class Capacity:
    requested: int
    pods: int  # generation pods that exist
    scheduled: int
    ready: int
    waits: tuple[ReplicaWait, ...]  # one per replica not ready, lowest first

    def counts(self) -> str:
        return (f"{self.pods} of {self.requested} generation pods exist, {self.scheduled} scheduled, "
                f"{self.ready} ready")

    def first_block(self) -> ReplicaWait | None:
        """The first replica waiting on something other than its own start; None when none is."""
        return next((w for w in self.waits if w.reason != Reason.STARTING), None)

    def why_not(self) -> str:
        return "; ".join(f"replica {w.replica}: {w.reason}: {w.message}" for w in self.waits)


def job_queued(job: JobState, kueue_says: str = "") -> Explanation:
    return reasons.queued(job.name, job.queue, job.suspended_since, kueue_says)


def capacity_of(name: str, replicas: int, pods: tuple[PodState, ...], refused_pods: dict[str, str],
                jobs: dict[str, JobState] | None = None, queue_waits: dict[str, str] | None = None,
                nodes: int = 1) -> Capacity:
    """`nodes`: the pods of one replica (server.nodesPerReplica): it serves once all of them are ready."""
    live = [p for p in pods if not p.deleting]
    serving = {r for r in range(replicas) if sum(p.ready for p in live if p.replica == r) >= nodes}
    waits = []
    for r in range(replicas):
        mine = [p for p in live if p.replica == r]
        if r in serving:
            continue
        job = names.generation_job_name(name, r)
        refused = refused_pods.get(job)
        stuck = next((p for p in mine if p.problem_reason), None)
        state = (jobs or {}).get(job)
        if state is not None and state.suspended and not state.deleting and not mine:
            waits.append(ReplicaWait(r, *job_queued(state, (queue_waits or {}).get(job, ""))))
        elif stuck is not None:
            waits.append(ReplicaWait(r, stuck.problem_reason, stuck.problem_message))
        elif refused and not mine:
            waits.append(ReplicaWait(r, Reason.PODS_REFUSED, refused))
        else:
            waits.append(ReplicaWait(r, *starting(mine)))
    return Capacity(requested=replicas, pods=len({p.replica for p in live}),
                    scheduled=len({p.replica for p in live if p.scheduled}),
                    ready=len(serving), waits=tuple(waits))


def starting(pods: list[PodState]) -> Explanation:
    """A replica waiting for nothing but time: how far its start is."""
    if not pods:
        return reasons.POD_BEING_CREATED
    return reasons.SERVER_LOADING if all(p.scheduled for p in pods) else reasons.AWAITING_SCHEDULER
