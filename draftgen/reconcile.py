"""One reconcile as a pure function: (spec, last status, observed world) -> what to create, what to
delete, the new status and the events to record. The kopf handlers do the reading and the writing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from draftgen_contracts import names
from draftgen_contracts.states import Phase

from . import plan
from .api import DatasetGenerationSpec, DatasetGenerationStatus, StageJobs
from .capacity import estimate
from .conditions import set_condition
from .fold import fold_replicas, fold_reports, is_generation_done, progress_text
from .observed import CONFIG_HASH_ANNOTATION, World
from .policies.failure_policy import failure_of
from .policies.job_policy import generation_jobs_finished, jobs_to_create, jobs_to_delete
from .policies.stage_policy import next_stage

STAGE_EVENTS = {
    ("Generating", "Merging"): ("BudgetsMet", "every dataset met its budget or ran out of prompts; "
                                              "generation Jobs deleted to free the GPUs"),
    ("Merging", "Extracting"): ("MergeSucceeded", "corpus merged; extracting hidden states"),
    ("Merging", "Done"): ("Succeeded", "corpus merged"),
    ("Extracting", "Done"): ("Succeeded", "hidden states extracted"),
    ("Done", "Extracting"): ("ExtractionEnabled", "extracting hidden states"),
}


@dataclass
class Decision:
    create: list[dict] = field(default_factory=list)
    delete_jobs: list[str] = field(default_factory=list)
    status: DatasetGenerationStatus = field(default_factory=DatasetGenerationStatus)
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)


def decide(name: str, namespace: str, generation: int, spec: DatasetGenerationSpec,
           previous: DatasetGenerationStatus, world: World, settings: plan.OperatorSettings, now: str) -> Decision:
    decision = Decision()
    config = plan.config_object(name, namespace, spec)
    digest = plan.config_digest(config)
    setup = [*plan.setup_objects(name, spec), config]
    decision.create = [o for o in setup if (o["kind"], o["metadata"]["name"]) not in world.existing]
    jobs = list(world.jobs.values())

    datasets = fold_reports(spec, world.reports, previous.datasets, now,
                            generation_jobs_finished(jobs, spec.server.replicas, digest))
    stage_before = previous.stage or "Generating"
    merge, extract = world.jobs.get(names.merge_job_name(name)), world.jobs.get(names.extract_job_name(name))
    stage = next_stage(stage_before, generation_done=is_generation_done(datasets),
                       merge_succeeded=bool(merge and merge.succeeded and not merge.deleting),
                       extract_succeeded=bool(extract and extract.succeeded and not extract.deleting),
                       extraction_enabled=spec.extraction.enabled)
    if stage != stage_before:
        reason, message = STAGE_EVENTS.get((stage_before, stage), ("Reopened", "a dataset is below its budget again; "
                                                                              "generation resumes from its output"))
        decision.events.append(("Normal", reason, message))

    still_failed = previous.phase == "Failed" and previous.observed_generation == generation
    failure = None if spec.suspend else failure_of(jobs)
    errors = [f"replica {r}: {report.error}" for r, report in sorted(world.reports.items()) if report.error]
    if failure and errors:  # what the pod said, beside what Kubernetes says
        failure = (failure[0], f"{failure[1]}; {'; '.join(errors)}")
    if failure and not still_failed:
        decision.events.append(("Warning", *failure))
    failed = still_failed or failure is not None

    if not failed:
        decision.delete_jobs = jobs_to_delete(stage, spec.suspend, jobs, digest)
        if not spec.suspend and not world.missing_claims:
            for component, replica in jobs_to_create(name, stage, spec.server.replicas, jobs):
                decision.create.append(_job(name, spec, component, replica, settings, config))
    if spec.suspend and decision.delete_jobs:
        decision.events.append(("Normal", "Suspended", f"deleted {', '.join(decision.delete_jobs)}; data kept"))

    decision.status = _status(name, generation, spec, previous, world, datasets, stage, failure, still_failed, now)
    return decision


def _job(name, spec, component, replica, settings, config) -> dict:
    if component == "generate":
        return plan.generation_job(name, spec, replica, settings, config)
    job = plan.merge_job(name, spec, settings) if component == "merge" else plan.extract_job(name, spec, settings)
    job["metadata"]["annotations"] = {CONFIG_HASH_ANNOTATION: plan.config_digest(config)}
    return job


def _status(name, generation, spec, previous, world, datasets, stage, failure, still_failed, now):
    status = DatasetGenerationStatus(
        stage=stage, observed_generation=generation, conditions=list(previous.conditions), datasets=datasets,
        replicas=fold_replicas(spec, world.reports),
        tokens=sum(d.tokens for d in datasets), budget_tokens=sum(d.budget_tokens for d in datasets),
        progress=progress_text(datasets), start_time=previous.start_time or now,
        completion_time=(previous.completion_time or now) if stage == "Done" else None,
        capacity=previous.capacity or estimate(spec),
        jobs=StageJobs(generation=[names.generation_job_name(name, r) for r in range(spec.server.replicas)],
                       merge=names.merge_job_name(name) if stage in ("Merging", "Extracting", "Done") else None,
                       extract=names.extract_job_name(name) if spec.extraction.enabled and stage in ("Extracting", "Done")
                       else None))

    if still_failed:  # a failure stays until the spec changes
        return previous.model_copy(update={"datasets": datasets, "tokens": status.tokens, "progress": status.progress})
    if failure:
        phase, (reason, message) = "Failed", failure
    elif spec.suspend:
        phase, reason, message = "Suspended", "Suspended", "spec.suspend is true: no Jobs run; all data is kept"
    elif world.missing_claims:
        phase, reason = "Pending", "VolumeMissing"
        message = ", ".join(f"PersistentVolumeClaim {c} not found" for c in world.missing_claims)
    elif stage == "Done":
        phase, reason, message = "Succeeded", "Succeeded", "corpus ready" + (
            " and hidden states extracted" if spec.extraction.enabled else "")
    elif stage == "Generating" and not world.reports:
        phase, reason, message = "Pending", "WaitingForServers", "generation pods are starting their servers"
    elif stage == "Merging":  # the reason records why generation ended and the GPUs were released
        phase, reason = "Merging", "BudgetsMet"
        message = "every dataset met its budget or ran out of prompts; generation Jobs deleted; merging the corpus"
    else:
        phase, reason = stage, stage
        message = {"Generating": f"{status.progress} of {status.budget_tokens} tokens",
                   "Extracting": "extracting hidden states"}[stage]
    status.phase = Phase(phase)

    c, g = status.conditions, generation
    c = set_condition(c, "Ready", phase == "Succeeded", reason, message, now, g)
    c = set_condition(c, "Progressing", phase in ("Pending", "Generating", "Merging", "Extracting")
                      and reason != "VolumeMissing", reason, message, now, g)
    c = set_condition(c, "Succeeded", phase == "Succeeded", reason, message if phase == "Succeeded" else "", now, g)
    c = set_condition(c, "Failed", phase == "Failed", reason if phase == "Failed" else "NotFailed",
                      message if phase == "Failed" else "", now, g)
    c = set_condition(c, "Suspended", phase == "Suspended", "Suspended" if phase == "Suspended" else "NotSuspended",
                      message if phase == "Suspended" else "", now, g)
    status.conditions = c
    return status
