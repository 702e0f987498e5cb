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

from ..observed import JobState, PodState

PERMANENT_REFUSALS = ("violates PodSecurity",)


def refused_for_good(message: str) -> bool:
    """Whether a refusal of a Job's pods will come again whatever the wait (a namespace's policy)."""
    return any(p in message for p in PERMANENT_REFUSALS)


@dataclass(frozen=True)
class ReplicaWait:
    replica: int
    reason: str  # Queued, PodsRefused, Unschedulable, ErrImagePull, ..., Starting
    message: str

    @property
    def permanent(self) -> bool:
        return self.reason == "PodsRefused" and refused_for_good(self.message)


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
        return next((w for w in self.waits if w.reason != "Starting"), None)

    def why_not(self) -> str:
        return "; ".join(f"replica {w.replica}: {w.reason}: {w.message}" for w in self.waits)


def queued_message(job: JobState, kueue_says: str = "") -> str:
    """What a suspended Job waits for: its queue, since when, and Kueue's own words when known."""
    if not job.queue:
        return f"its Job {job.name} is suspended since {job.suspended_since} until a queue admits it"
    why = f": {kueue_says}" if kueue_says else ""
    return f"its Job {job.name} is queued in Kueue LocalQueue {job.queue} since {job.suspended_since}{why}"


def capacity_of(name: str, replicas: int, pods: tuple[PodState, ...], refused_pods: dict[str, str],
                jobs: dict[str, JobState] | None = None, queue_waits: dict[str, str] | None = None) -> Capacity:
    live = [p for p in pods if not p.deleting]
    waits = []
    for r in range(replicas):
        mine = [p for p in live if p.replica == r]
        if any(p.ready for p in mine):
            continue
        job = names.generation_job_name(name, r)
        refused = refused_pods.get(job)
        stuck = next((p for p in mine if p.problem_reason), None)
        state = (jobs or {}).get(job)
        if state is not None and state.suspended and not state.deleting and not mine:
            waits.append(ReplicaWait(r, "Queued", queued_message(state, (queue_waits or {}).get(job, ""))))
        elif stuck is not None:
            waits.append(ReplicaWait(r, stuck.problem_reason, stuck.problem_message))
        elif refused and not mine:
            waits.append(ReplicaWait(r, "PodsRefused", refused))
        else:
            waits.append(ReplicaWait(r, "Starting", "its pod is being created" if not mine else
                                     "its server is loading the model" if all(p.scheduled for p in mine)
                                     else "its pod waits for the scheduler"))
    return Capacity(requested=replicas, pods=len({p.replica for p in live}),
                    scheduled=len({p.replica for p in live if p.scheduled}),
                    ready=len({p.replica for p in live if p.ready}), waits=tuple(waits))
