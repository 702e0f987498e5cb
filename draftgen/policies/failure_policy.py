"""Failure policy: does what Kubernetes says of the Jobs and their pods fail the whole
DatasetGeneration, and with what reason?

Jobs retry on their own (backoffLimit, podFailurePolicy); a Job with its Failed condition has
given up, so the DatasetGeneration fails too, naming the stage and Kubernetes' own reason; but one a
full volume stopped (space_policy), which is tried again. Pods a
namespace's policy refuses (Pod Security) will be refused again whatever the wait: that fails it too.
"""

from __future__ import annotations

from draftgen.observed import JobState, World
from draftgen.reasons import Explanation, Reason, job_failed, preflight_pods_refused_for_good, \
    replica_pods_refused_for_good
from draftgen_contracts import names
from draftgen_contracts.states import Component, Stage

from .capacity_policy import Capacity, refused_for_good
from .space_policy import stopped_by_a_full_volume

STAGE_REASONS = {Component.PREFLIGHT: Reason.PREFLIGHT_FAILED, Component.GENERATE: Reason.GENERATION_JOB_FAILED,
                 Component.MERGE: Reason.MERGE_JOB_FAILED, Component.EXTRACT: Reason.EXTRACTION_JOB_FAILED}


def failure_of(jobs: list[JobState]) -> Explanation | None:
    """Why the first failed Job still present failed, or None when none failed."""
    for job in sorted(jobs, key=lambda j: j.name):
        if job.failed and not job.deleting and not stopped_by_a_full_volume(job):
            return job_failed(STAGE_REASONS.get(job.component, Reason.JOB_FAILED), job.name, job.why_failed())
    return None


def pods_refused_for_good(capacity: Capacity | None) -> Explanation | None:
    """A replica whose pods the cluster will never create (Pod Security): the run fails, quoting it."""
    wait = next((w for w in capacity.waits if w.permanent), None) if capacity else None
    return replica_pods_refused_for_good(wait.replica, wait.message) if wait else None


def preflight_refused_for_good(name: str, stage: Stage, world: World) -> Explanation | None:
    """The preflight Job's pods refused by a policy that will refuse them again (Pod Security)."""
    said = world.refused_pods.get(names.preflight_job_name(name)) if stage == Stage.PREFLIGHT else None
    return preflight_pods_refused_for_good(said) if said and refused_for_good(said) else None
