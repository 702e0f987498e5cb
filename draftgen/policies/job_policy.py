"""Job policy: which Jobs must exist now, and which must go?

The preflight Job runs first and stays once it succeeded (a record of what it found); one of an
older spec that did not succeed goes, so a fixed spec is checked again. Generation Jobs go the
moment generation is over (deleted with Foreground propagation by the
caller, so the GPUs are free in seconds) and when their config is stale (a budget changed while
they ran: they are replaced, and the new pods resume from the stored output). Every unfinished Job
goes while suspended, but the preflight: a suspended run still gets its plan (status.preflight and
status.estimate) from that CPU Job, and no GPU is taken until it is resumed. A Job still being deleted
counts as present, so its replacement waits for it.
"""

from __future__ import annotations

from draftgen.observed import JobState
from draftgen_contracts import names
from draftgen_contracts.progress import ProgressDocument
from draftgen_contracts.states import DATASET_DONE, Component, Stage

# The stages that come before each Job's own: the pipeline back in one makes the Job's output stale.
STALE_IN = {Component.GENERATE: (Stage.GENERATING,), Component.MERGE: (Stage.GENERATING,),
                  Component.EXTRACT: (Stage.GENERATING, Stage.MERGING)}


def runs_while_suspended(component: Component) -> bool:
    """The preflight alone: it needs no GPU, and its findings are the plan a suspended run is created for."""
    return component == Component.PREFLIGHT


def jobs_to_delete(stage: Stage, suspended: bool, jobs: list[JobState], config_hash: str) -> list[str]:
    doomed = []
    for job in jobs:
        if job.deleting:
            continue
        if suspended and not job.succeeded and not runs_while_suspended(job.component):
            doomed.append(job.name)
        elif job.component == Component.PREFLIGHT and job.config_hash != config_hash and not job.succeeded:
            doomed.append(job.name)  # a preflight of an older spec (one that failed, say): the new one reruns it
        elif job.component == Component.GENERATE and (stage != Stage.GENERATING or job.config_hash != config_hash):
            doomed.append(job.name)
        elif job.component in (Component.MERGE, Component.EXTRACT) and stage in STALE_IN[job.component]:
            doomed.append(job.name)  # the pipeline went back before this Job's stage: its output is stale
    return sorted(doomed)


def jobs_to_create(name: str, stage: Stage, replicas: int, jobs: list[JobState],
                   suspended: bool = False) -> list[tuple[Component, int]]:
    """(component, replica) of each Job the stage needs that does not exist yet (while suspended, only
    those that run suspended). The merge waits until every generation pod is gone, so no response is
    appended after the merge read the output."""
    present = {j.name for j in jobs}
    wanted: list[tuple[Component, int, str]] = []
    if stage == Stage.PREFLIGHT:
        wanted = [(Component.PREFLIGHT, 0, names.preflight_job_name(name))]
    elif stage == Stage.GENERATING:
        wanted = [(Component.GENERATE, r, names.generation_job_name(name, r)) for r in range(replicas)]
    elif stage == Stage.MERGING and not any(j.component == Component.GENERATE for j in jobs):
        wanted = [(Component.MERGE, 0, names.merge_job_name(name))]
    elif stage == Stage.EXTRACTING:
        wanted = [(Component.EXTRACT, 0, names.extract_job_name(name))]
    return [(component, r) for component, r, job_name in wanted
            if job_name not in present and (not suspended or runs_while_suspended(component))]


def left_nothing(report: ProgressDocument | None) -> bool:
    """A replica's final report says its process ended with every dataset done (budget met or rows
    used up)."""
    return report is not None and report.finished and all(d.state in DATASET_DONE for d in report.datasets.values())


def generation_jobs_finished(jobs: list[JobState], reports: dict[int, ProgressDocument], replicas: int,
                             config_hash: str) -> bool:
    """No prompts are left to send: every replica's generation Job of the current config succeeded,
    and its final report says it left nothing. A Job's success alone does not say it: a pod that
    exited 0 when it was stopped (a drain, an eviction) completes its Job too."""
    done = {j.replica for j in jobs if j.component == Component.GENERATE and j.succeeded
            and j.config_hash == config_hash and left_nothing(reports.get(j.replica))}
    return done >= set(range(replicas))


def jobs_stopped_short(jobs: list[JobState], reports: dict[int, ProgressDocument], config_hash: str) -> list[str]:
    """Generation Jobs of the current config that succeeded though their replica's final report has
    work left (its pod exited 0 when stopped, as generate did on SIGTERM before it exited 143): they
    go, so the replica's Job is created again and resumes where it stopped. A report not yet final
    is waited for: the operator may see a Job complete before it sees the report written before."""
    return sorted(j.name for j in jobs if j.component == Component.GENERATE and j.succeeded and not j.deleting
                  and j.config_hash == config_hash and (report := reports.get(j.replica)) is not None
                  and report.finished and not left_nothing(report))
