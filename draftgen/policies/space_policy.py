"""Space policy: has a full output volume stopped a stage, and is its Job due to be tried again?

A stage's process that finds the volume full exits VOLUME_FULL, keeping all it wrote; its Job then
fails at once by its second FailJob rule (draftgen.plan), which fails no run: the reconcile says the
volume is full (condition and event, naming the claim and what the stage still needs) and, after
OperatorSettings.volume_full_retry_s, deletes that Job so the stage's Job is created again. The new
pod resumes from what is stored, or exits as quickly if there is still no room.
"""

from __future__ import annotations

from draftgen.observed import JobState, failed_exit_code
from draftgen_contracts import exit_codes
from draftgen_contracts.timestamps import iso_after


def stopped_by_a_full_volume(job: JobState) -> bool:
    return job.failed and failed_exit_code(job) in exit_codes.WAIT_FOR_SPACE


def job_stopped_by_a_full_volume(jobs: list[JobState]) -> JobState | None:
    """The first Job still present that a full volume stopped."""
    return next((j for j in sorted(jobs, key=lambda j: j.name) if stopped_by_a_full_volume(j) and not j.deleting),
                None)


def retry_due(job: JobState, now: str, wait_s: float) -> bool:
    """Whether the Job has waited long enough to be replaced (timestamps: one fixed-width format)."""
    return not job.failed_at or iso_after(job.failed_at, wait_s) <= now
