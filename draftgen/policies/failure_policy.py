"""Failure policy: does a failed Job fail the whole DatasetGeneration, and with what reason?

Jobs retry on their own (backoffLimit, podFailurePolicy); a Job with its Failed condition has
given up, so the DatasetGeneration fails too, naming the stage and Kubernetes' own reason.
"""

from __future__ import annotations

from draftgen.observed import JobState

STAGE_REASONS = {"preflight": "PreflightFailed", "generate": "GenerationJobFailed", "merge": "MergeJobFailed", "extract": "ExtractionJobFailed"}


def failure_of(jobs: list[JobState]) -> tuple[str, str] | None:
    """(reason, message) of the first failed Job still present, or None when none failed."""
    for job in sorted(jobs, key=lambda j: j.name):
        if job.failed and not job.deleting:
            why = f"{job.failure_reason}: {job.failure_message}" if job.failure_message else job.failure_reason
            return STAGE_REASONS.get(job.component, "JobFailed"), f"Job {job.name} failed ({why or 'no reason given'})"
    return None
