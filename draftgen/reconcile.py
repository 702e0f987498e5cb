"""One reconcile as a pure function: (spec, last status, observed world) -> what to create, what to
delete, the new status and the events to record. The kopf handlers do the reading and the writing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from draftgen_contracts import names
from draftgen_contracts.states import Phase

from . import plan
from .api import DatasetGenerationSpec, DatasetGenerationStatus, StageJobs
from .conditions import condition, set_condition
from .estimate import budgets_out_of_reach, estimate
from .fold import fold_replicas, fold_reports, is_generation_done, progress_text, reported_tokens
from .observed import CONFIG_HASH_ANNOTATION, World
from .policies.capacity_policy import Capacity, capacity_of, queued_message, refused_for_good
from .policies.failure_policy import failure_of
from .policies.job_policy import generation_jobs_finished, jobs_to_create, jobs_to_delete
from .policies.stage_policy import next_stage
from .preflight_status import preflight_status

STAGE_EVENTS = {
    ("Preflight", "Generating"): ("PreflightPassed", "model, tokenizer and datasets checked on the CPU; "
                                                     "creating the generation Jobs"),
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
    owner = world.output_owner
    if owner is None:  # claim the folder first; Jobs only once the claim is seen to be ours
        decision.create.append(plan.output_lock(name, spec))
    jobs = list(world.jobs.values())

    datasets = fold_reports(spec, world.reports, previous.datasets, now,
                            generation_jobs_finished(jobs, spec.server.replicas, digest))
    stage_before = previous.stage or "Preflight"
    merge, extract = world.jobs.get(names.merge_job_name(name)), world.jobs.get(names.extract_job_name(name))
    preflight = world.jobs.get(names.preflight_job_name(name))
    stage = next_stage(stage_before, generation_done=is_generation_done(datasets),
                       merge_succeeded=bool(merge and merge.succeeded and not merge.deleting),
                       extract_succeeded=bool(extract and extract.succeeded and not extract.deleting),
                       extraction_enabled=spec.extraction.enabled,
                       preflight_succeeded=bool(preflight and preflight.succeeded and preflight.config_hash == digest))
    if stage != stage_before:
        reason, message = STAGE_EVENTS.get((stage_before, stage), ("Reopened", "a dataset is below its budget again; "
                                                                              "generation resumes from its output"))
        decision.events.append(("Normal", reason, message))

    still_failed = previous.phase == "Failed" and previous.observed_generation == generation
    capacity = (capacity_of(name, spec.server.replicas, world.pods, world.refused_pods, world.jobs, world.queue_waits)
                if world.pods is not None and stage == "Generating" and not spec.suspend else None)
    # A preflight of an older spec no longer speaks for this one (it is deleted and run again).
    current = [j for j in jobs if not (j.component == "preflight" and j.config_hash != digest)]
    failure = None if spec.suspend else (failure_of(current) or pods_refused_for_good(capacity)
                                         or preflight_refused_for_good(name, stage, world))
    errors = [f"replica {r}: {report.error}" for r, report in sorted(world.reports.items()) if report.error]
    if world.preflight is not None and world.preflight.problem is not None:
        errors.insert(0, f"preflight: {world.preflight.problem.says()}")
    if failure and errors:  # what the pod said, beside what Kubernetes says
        failure = (failure[0], f"{failure[1]}; {'; '.join(errors)}")
    if failure and not still_failed:
        decision.events.append(("Warning", *failure))
    failed = still_failed or failure is not None

    in_use = owner is not None and owner != name
    if in_use and previous_reason(previous) != "OutputInUse":
        decision.events.append(("Warning", "OutputInUse", output_in_use_message(name, spec, owner)))
    if not failed and not in_use:
        decision.delete_jobs = jobs_to_delete(stage, spec.suspend, jobs, digest)
        if not spec.suspend and not world.missing_claims and owner == name:
            for component, replica in jobs_to_create(name, stage, spec.server.replicas, jobs):
                decision.create.append(_job(name, spec, component, replica, settings, config))
    if spec.suspend and decision.delete_jobs:
        decision.events.append(("Normal", "Suspended", f"deleted {', '.join(decision.delete_jobs)}; data kept"))

    decision.status = _status(name, generation, spec, previous, world, datasets, stage, failure, still_failed, now,
                              capacity)
    if capacity is not None and not failed:
        decision.events += capacity_events(previous, decision.status)
    reach, before = condition(decision.status.conditions, "BudgetsReachable"), condition(previous.conditions,
                                                                                          "BudgetsReachable")
    if reach is not None and reach.status == "False" and (before is None or before.status != "False"):
        decision.events.append(("Warning", reach.reason, reach.message))
    return decision


def pods_refused_for_good(capacity: Capacity | None) -> tuple[str, str] | None:
    """A replica whose pods the cluster will never create (Pod Security): the run fails, quoting it."""
    wait = next((w for w in capacity.waits if w.permanent), None) if capacity else None
    return ("PodsRefused", f"replica {wait.replica}: {wait.message}") if wait else None


def preflight_refused_for_good(name: str, stage: str, world: World) -> tuple[str, str] | None:
    """The preflight Job's pods refused by a policy that will refuse them again (Pod Security)."""
    said = world.refused_pods.get(names.preflight_job_name(name)) if stage == "Preflight" else None
    return ("PodsRefused", f"preflight: {said}") if said and refused_for_good(said) else None


def capacity_events(previous: DatasetGenerationStatus, status: DatasetGenerationStatus) -> list[tuple[str, str, str]]:
    """A Warning when a replica starts waiting on something other than its own start or its queue."""
    before, now = condition(previous.conditions, "Capacity"), condition(status.conditions, "Capacity")
    if now is None or now.status == "True" or now.reason in ("Starting", "Queued"):
        return []
    if before is not None and (before.reason, before.message) == (now.reason, now.message):
        return []
    return [("Warning", now.reason, now.message)]


def stage_job_queued(name: str, stage: str, world: World) -> str | None:
    """What the merge or extraction Job waits for while a queue (Kueue) holds it suspended; None otherwise."""
    job_name = {"Merging": names.merge_job_name(name), "Extracting": names.extract_job_name(name)}.get(stage)
    job = world.jobs.get(job_name) if job_name else None
    if job is None or not job.suspended or job.deleting:
        return None
    return queued_message(job, world.queue_waits.get(job.name, ""))


def previous_reason(previous: DatasetGenerationStatus) -> str | None:
    ready = condition(previous.conditions, "Ready")
    return ready.reason if ready else None


def output_in_use_message(name: str, spec: DatasetGenerationSpec, owner: str) -> str:
    folder = names.output_folder(spec.output.claim_name, spec.output.path or name)
    lock = names.output_lock_name(spec.output.claim_name, spec.output.path or name)
    return (f"output folder {folder} belongs to DatasetGeneration {owner} (ConfigMap {lock}); this one runs nothing "
            f"and touches none of its data: give it another output.path")


def _job(name, spec, component, replica, settings, config) -> dict:
    if component == "generate":
        return plan.generation_job(name, spec, replica, settings, config)
    job = (plan.preflight_job(name, spec, settings, config) if component == "preflight"
           else plan.merge_job(name, spec, settings) if component == "merge" else plan.extract_job(name, spec, settings))
    job["metadata"]["annotations"] = {CONFIG_HASH_ANNOTATION: plan.config_digest(config)}
    return job


def _status(name, generation, spec, previous, world, datasets, stage, failure, still_failed, now, capacity):
    status = DatasetGenerationStatus(
        stage=stage, observed_generation=generation, conditions=list(previous.conditions), datasets=datasets,
        replicas=fold_replicas(spec, world.reports),
        tokens=reported_tokens(datasets), budget_tokens=sum(d.budget_tokens for d in datasets),
        progress=progress_text(datasets), start_time=previous.start_time or now,
        completion_time=(previous.completion_time or now) if stage == "Done" else None,
        preflight=preflight_status(world.preflight) if world.preflight else previous.preflight,
        jobs=StageJobs(generation=[names.generation_job_name(name, r) for r in range(spec.server.replicas)],
                       merge=names.merge_job_name(name) if stage in ("Merging", "Extracting", "Done") else None,
                       extract=names.extract_job_name(name) if spec.extraction.enabled and stage in ("Extracting", "Done")
                       else None))
    found = status.preflight
    status.estimate = estimate(spec, found, datasets, previous.estimate, now,
                               hidden_size=found.model.hidden_size if found and found.model else None)

    if still_failed:  # a failure stays until the spec changes
        return previous.model_copy(update={"datasets": datasets, "tokens": status.tokens, "progress": status.progress,
                                           "estimate": status.estimate})
    if failure:
        phase, (reason, message) = "Failed", failure
    elif spec.suspend:
        phase, reason, message = "Suspended", "Suspended", "spec.suspend is true: no Jobs run; all data is kept"
    elif world.output_owner not in (None, name):
        phase, reason, message = "Pending", "OutputInUse", output_in_use_message(name, spec, world.output_owner)
    elif world.missing_claims:
        phase, reason = "Pending", "VolumeMissing"
        message = ", ".join(f"PersistentVolumeClaim {c} not found" for c in world.missing_claims)
    elif stage == "Done":
        phase, reason, message = "Succeeded", "Succeeded", "corpus ready" + (
            " and hidden states extracted" if spec.extraction.enabled else "")
    elif stage == "Preflight":
        phase, reason = "Pending", "Preflight"
        message = "checking the model, the tokenizer and the datasets on the CPU before any GPU is asked for"
        if refused := world.refused_pods.get(names.preflight_job_name(name)):
            reason, message = "PodsRefused", f"the preflight Job's pods are refused: {refused}"
    elif stage == "Generating" and not world.reports:
        phase, reason, message = "Pending", "WaitingForServers", "generation pods are starting their servers"
        if capacity is not None:
            blocked = capacity.first_block()
            if blocked and len(capacity.waits) == capacity.requested:  # nothing runs, and not for want of time
                reason = blocked.reason
            message = capacity.counts() + (f"; {capacity.why_not()}" if capacity.waits else "")
    elif (queued := stage_job_queued(name, stage, world)) is not None:
        phase, reason, message = stage, "Queued", queued
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
                      and reason not in ("VolumeMissing", "OutputInUse"), reason, message, now, g)
    c = set_condition(c, "Succeeded", phase == "Succeeded", reason, message if phase == "Succeeded" else "", now, g)
    c = set_condition(c, "Failed", phase == "Failed", reason if phase == "Failed" else "NotFailed",
                      message if phase == "Failed" else "", now, g)
    c = set_condition(c, "Suspended", phase == "Suspended", "Suspended" if phase == "Suspended" else "NotSuspended",
                      message if phase == "Suspended" else "", now, g)
    if status.preflight is not None and not status.preflight.problem:  # a failed preflight's findings are partial
        short = budgets_out_of_reach(spec, status.estimate, status.preflight, datasets)
        c = set_condition(c, "BudgetsReachable", short is None, "BudgetOutOfReach" if short else "RowsSuffice",
                          short or "every dataset's usable rows may reach its budget", now, g)
    if capacity is not None:
        status.ready_replicas = capacity.ready
        first = capacity.first_block() or (capacity.waits[0] if capacity.waits else None)
        c = set_condition(c, "Capacity", not capacity.waits, first.reason if first else "AllReplicasReady",
                          f"{capacity.ready} of {capacity.requested} generation replicas ready"
                          + (f"; {capacity.why_not()}" if capacity.waits else ""), now, g)
    else:  # no generation replicas run in this stage
        c = [x for x in c if x.type != "Capacity"]
    status.conditions = c
    return status
