"""One reconcile as a pure function: (spec, last status, observed world) -> what to create, what to
delete, the new status and the events to record. The kopf handlers do the reading and the writing.

Each question is a policy (draftgen/policies/): the next stage, a failure, the Jobs to have, the
capacity, the phase; each condition has its setter (draftgen.conditions) and each reason its
constant (draftgen.reasons). What is here is the order they are asked in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from draftgen_contracts import names
from draftgen_contracts.states import Component, Phase, Stage

from . import plan, reasons
from .api import Condition, DatasetGenerationSpec, DatasetGenerationStatus, DatasetStatus, StageJobs
from .conditions import (ConditionType, condition, set_at_budget, set_budgets_reachable, set_capacity, set_failed,
                         set_progressing, set_ready, set_succeeded, set_suspended)
from .estimate import budgets_out_of_reach, estimate
from .extraction_status import extraction_status
from .fold import fold_replicas, fold_reports, is_generation_done, progress_text, reported_tokens
from .observed import CONFIG_HASH_ANNOTATION, JobState, World
from .policies.capacity_policy import Capacity, capacity_of, job_queued
from .policies.failure_policy import failure_of, preflight_refused_for_good, pods_refused_for_good
from .policies.group_policy import RESTART_LIMIT, groups_to_restart
from .policies.job_policy import (generation_jobs_finished, jobs_stopped_short, jobs_to_create, jobs_to_delete,
                                  runs_while_suspended)
from .policies.phase_policy import PhaseFacts, ShownPhase, phase_of
from .policies.space_policy import job_stopped_by_a_full_volume, retry_due
from .policies.stage_policy import next_stage, stage_event
from .preflight_status import preflight_status
from .reasons import Explanation, Reason

Event = tuple[str, str, str]  # (type, reason, message)


@dataclass
class Decision:
    create: list[dict] = field(default_factory=list)
    delete_jobs: list[str] = field(default_factory=list)
    status: DatasetGenerationStatus = field(default_factory=DatasetGenerationStatus)
    events: list[Event] = field(default_factory=list)


@dataclass(frozen=True)
class Reconcile:
    """One reconcile's inputs: the object, what it said last, and the world observed now."""

    name: str
    namespace: str
    generation: int
    spec: DatasetGenerationSpec
    previous: DatasetGenerationStatus
    world: World
    settings: plan.OperatorSettings
    now: str
    retry: str = ""  # the object's draftgen.io/retry annotation


@dataclass(frozen=True)
class Findings:
    """What one reconcile found, from which the Jobs, the status and the events follow."""

    config: dict  # the generate config's ConfigMap
    digest: str  # its hash, on every Job made from it
    datasets: list[DatasetStatus]
    stage: Stage
    capacity: Capacity | None  # None where generation pods are not observed or none should run
    failure: Explanation | None  # why the run fails, as found now (said as an event unless still_failed)
    volume_full: Explanation | None  # a stage stopped by a full output volume (policies/space_policy)
    still_failed: bool  # failed before, and the spec has not changed since
    in_use: bool  # the output folder belongs to another object
    restarted: list[JobState]  # failed rank groups started again now (policies/group_policy)
    retried: list[JobState]  # the failed Jobs a retry deletes, so that they are created again
    group_restarts: dict[int, int]  # each replica's group restarts, these included

    @property
    def failed(self) -> bool:
        return self.still_failed or self.failure is not None


def decide(name: str, namespace: str, generation: int, spec: DatasetGenerationSpec,
           previous: DatasetGenerationStatus, world: World, settings: plan.OperatorSettings, now: str,
           retry: str = "") -> Decision:
    """`retry`: the object's draftgen.io/retry annotation; a value the status has not answered yet
    retries a Failed run."""
    r = Reconcile(name, namespace, generation, spec, previous, world, settings, now, retry)
    found = find(r)
    decision = Decision(create=setup_to_create(r, found.config), events=events_before_status(r, found))
    if not found.failed and not found.in_use:
        decision.delete_jobs = jobs_to_delete(found.stage, spec.suspend, list(world.jobs.values()), found.digest)
        decision.delete_jobs += jobs_to_try_again(r) + [j.name for j in found.restarted + found.retried]
        short = jobs_stopped_short(list(r.world.jobs.values()), r.world.reports, found.digest)
        decision.delete_jobs += [j for j in short if j not in decision.delete_jobs]
        if short:
            decision.events.append(("Warning", *reasons.stopped_short(short)))
        decision.create += jobs_wanted(r, found)
    if is_retry_asked(r):
        decision.events.append(("Normal", *reasons.retried(r.retry, [j.name for j in found.retried])))
    if spec.suspend and decision.delete_jobs:
        decision.events.append(("Normal", *reasons.suspended_jobs_deleted(decision.delete_jobs)))
    decision.status = status_of(r, found)
    decision.events += events_of_status(previous, decision.status, found)
    return decision


# --- what the reconcile finds -----------------------------------------------------------------------

def find(r: Reconcile) -> Findings:
    config = plan.config_object(r.name, r.namespace, r.spec, r.settings)
    digest = plan.config_digest(config)
    jobs = list(r.world.jobs.values())
    datasets = fold_reports(r.spec, r.world.reports, r.previous.datasets, r.now,
                            generation_jobs_finished(jobs, r.world.reports, r.spec.server.replicas, digest))
    stage = stage_now(r, datasets, digest)
    capacity = capacity_now(r, stage)
    owner = r.world.output_owner
    before = group_restarts_before(r.previous)
    restartable = groups_to_restart(jobs, r.spec.server.nodes_per_replica, before)
    retried = [j for j in jobs if j.failed and not j.deleting] if is_retry_asked(r) else []
    failure = failure_now(r, stage, capacity, digest, restartable + retried)
    still_failed = (r.previous.phase == Phase.FAILED and r.previous.observed_generation == r.generation
                    and not is_retry_asked(r))
    in_use = owner is not None and owner != r.name
    restarted = [] if failure or still_failed or in_use else restartable  # a run that stops restarts nothing
    return Findings(config=config, digest=digest, datasets=datasets, stage=stage, capacity=capacity,
                    failure=failure, volume_full=volume_full_now(r), still_failed=still_failed, in_use=in_use,
                    restarted=restarted, retried=retried,
                    group_restarts={**before, **{j.replica: before.get(j.replica, 0) + 1 for j in restarted}})


def is_retry_asked(r: Reconcile) -> bool:
    """A Failed run whose draftgen.io/retry annotation has a value its status has not answered."""
    return r.previous.phase == Phase.FAILED and bool(r.retry) and r.retry != (r.previous.retry or "")


def group_restarts_before(previous: DatasetGenerationStatus) -> dict[int, int]:
    return {replica.index: replica.group_restarts for replica in previous.replicas if replica.group_restarts}


def stage_now(r: Reconcile, datasets: list[DatasetStatus], digest: str) -> Stage:
    def succeeded(job: JobState | None) -> bool:
        return bool(job and job.succeeded and not job.deleting)

    preflight = r.world.jobs.get(names.preflight_job_name(r.name))
    return next_stage(stage_before(r.previous), generation_done=is_generation_done(datasets),
                      merge_succeeded=succeeded(r.world.jobs.get(names.merge_job_name(r.name))),
                      extract_succeeded=succeeded(r.world.jobs.get(names.extract_job_name(r.name))),
                      extraction_enabled=r.spec.extraction.enabled,
                      preflight_succeeded=bool(preflight and preflight.succeeded and preflight.config_hash == digest))


def capacity_now(r: Reconcile, stage: Stage) -> Capacity | None:
    """The generation replicas' capacity, where their pods are observed and should run."""
    if r.world.pods is None or stage != Stage.GENERATING or r.spec.suspend:
        return None
    return capacity_of(r.name, r.spec.server.replicas, r.world.pods, r.world.refused_pods, r.world.jobs,
                       r.world.queue_waits, nodes=r.spec.server.nodes_per_replica)


def stage_before(previous: DatasetGenerationStatus) -> Stage:
    return Stage(previous.stage or Stage.PREFLIGHT)  # a new object starts at its preflight


def failure_now(r: Reconcile, stage: Stage, capacity: Capacity | None, digest: str,
                restarted: list[JobState]) -> Explanation | None:
    """Why the run fails now, with what its pods said; while suspended only the preflight's (the other
    Jobs are going anyway). A Job started again (a rank group, a retry) fails nothing."""
    # A preflight of an older spec no longer speaks for this one (it is deleted and run again).
    current = [j for j in r.world.jobs.values() if not (j.component == Component.PREFLIGHT and j.config_hash != digest)
               and (not r.spec.suspend or runs_while_suspended(j.component)) and j not in restarted]
    failure = (failure_of(current) or pods_refused_for_good(capacity)
               or preflight_refused_for_good(r.name, stage, r.world))
    return reasons.with_pod_errors(failure, pod_errors(r.world)) if failure else None


def volume_full_now(r: Reconcile) -> Explanation | None:
    """The stage a full output volume stopped, with what it said it still needs (the extraction says)."""
    job = job_stopped_by_a_full_volume(list(r.world.jobs.values()))
    if job is None:
        return None
    said = r.world.extraction.volume_full if job.component == Component.EXTRACT and r.world.extraction else ""
    return reasons.volume_full(r.spec.output.claim_name, job.name, said, r.settings.volume_full_retry_s)


def rank_failures(world: World, replica: int | None = None) -> list[str]:
    """What the failed pods of one replica (None: of every replica) said, in rank order."""
    return [f"pod {pod.name}: {pod.failure}" for pod in sorted(world.pods or (), key=lambda p: (p.replica, p.rank, p.name))
            if pod.failure and replica in (None, pod.replica)]


def pod_errors(world: World) -> list[str]:
    """What the preflight and each replica reported of their own failure, beside Kubernetes' words."""
    errors = [f"replica {r}: {report.error}" for r, report in sorted(world.reports.items()) if report.error]
    errors += rank_failures(world)
    if world.preflight is not None and world.preflight.problem is not None:
        errors.insert(0, f"preflight: {world.preflight.problem.says()}")
    return errors


def output_in_use(r: Reconcile) -> Explanation:
    folder = names.output_folder(r.spec.output.claim_name, r.spec.output.path or r.name)
    lock = names.output_lock_name(r.spec.output.claim_name, r.spec.output.path or r.name)
    return reasons.output_in_use(folder, r.world.output_owner, lock)


def stage_job_queued(r: Reconcile, stage: Stage) -> Explanation | None:
    """What the merge or extraction Job waits for while a queue (Kueue) holds it suspended; None otherwise."""
    job_name = {Stage.MERGING: names.merge_job_name, Stage.EXTRACTING: names.extract_job_name}.get(stage)
    job = r.world.jobs.get(job_name(r.name)) if job_name else None
    if job is None or not job.suspended or job.deleting:
        return None
    return job_queued(job, r.world.queue_waits.get(job.name, ""))


# --- the children -----------------------------------------------------------------------------------

def setup_to_create(r: Reconcile, config: dict) -> list[dict]:
    """The setup objects not there yet, and the output folder's claim while it has none: Jobs come only
    once the claim is seen to be ours."""
    setup = [*plan.setup_objects(r.name, r.spec), config]
    missing = [o for o in setup if (o["kind"], o["metadata"]["name"]) not in r.world.existing]
    return missing + ([plan.output_lock(r.name, r.spec)] if r.world.output_owner is None else [])


def jobs_wanted(r: Reconcile, found: Findings) -> list[dict]:
    if r.world.missing_claims or r.world.output_owner != r.name:
        return []
    jobs = [job_object(r, found, component, replica)
            for component, replica in jobs_to_create(r.name, found.stage, r.spec.server.replicas,
                                                     list(r.world.jobs.values()), r.spec.suspend)]
    # The keys and the network policy before the pods they guard; each created once (a second create
    # is refused as existing).
    if not any(is_generation_job(j) for j in jobs):
        return jobs
    guards = [plan.keys_secret(r.name, r.spec), plan.generation_network_policy(r.name, r.spec, r.settings),
              plan.ranks_service(r.name, r.spec)]
    return [*(g for g in guards if g), *jobs]


def jobs_to_try_again(r: Reconcile) -> list[str]:
    """A Job a full volume stopped, once it has waited: deleted, so the stage's Job is created again."""
    job = job_stopped_by_a_full_volume(list(r.world.jobs.values()))
    return [job.name] if job and retry_due(job, r.now, r.settings.volume_full_retry_s) else []


def is_generation_job(obj: dict) -> bool:
    return obj["metadata"]["labels"].get(names.LABEL_COMPONENT) == Component.GENERATE


def job_object(r: Reconcile, found: Findings, component: Component, replica: int) -> dict:
    if component == Component.GENERATE:
        return plan.generation_job(r.name, r.spec, replica, r.settings, found.config)
    job = (plan.preflight_job(r.name, r.spec, r.settings, found.config) if component == Component.PREFLIGHT
           else plan.merge_job(r.name, r.spec, r.settings) if component == Component.MERGE
           else plan.extract_job(r.name, r.spec, r.settings))
    job["metadata"]["annotations"] = {CONFIG_HASH_ANNOTATION: found.digest}
    return job


# --- the events -------------------------------------------------------------------------------------

def events_before_status(r: Reconcile, found: Findings) -> list[Event]:
    """A stage left, a new failure, and a folder found taken (said once)."""
    events: list[Event] = []
    if (step := stage_event(stage_before(r.previous), found.stage)) is not None:
        events.append(("Normal", *step))
    if found.failure and not found.still_failed:
        events.append(("Warning", *found.failure))
    if found.in_use and last_ready_reason(r.previous) != Reason.OUTPUT_IN_USE:
        events.append(("Warning", *output_in_use(r)))
    if found.volume_full and not found.failed and last_ready_reason(r.previous) != Reason.VOLUME_FULL:
        events.append(("Warning", *found.volume_full))
    events += [("Warning", *reasons.group_restarted(
        job.replica, r.spec.server.nodes_per_replica, job.name, "; ".join([job.why_failed(), *rank_failures(
            r.world, job.replica)]), found.group_restarts[job.replica], RESTART_LIMIT)) for job in found.restarted]
    return events


def events_of_status(previous: DatasetGenerationStatus, status: DatasetGenerationStatus,
                     found: Findings) -> list[Event]:
    events = capacity_events(previous, status) if found.capacity is not None and not found.failed else []
    return events + budgets_events(previous, status) + at_budget_events(previous, status)


def capacity_events(previous: DatasetGenerationStatus, status: DatasetGenerationStatus) -> list[Event]:
    """A Warning when a replica starts waiting on something other than its own start or its queue."""
    before, now = condition(previous.conditions, ConditionType.CAPACITY), condition(status.conditions,
                                                                                    ConditionType.CAPACITY)
    if now is None or now.status == "True" or now.reason in (Reason.STARTING, Reason.QUEUED):
        return []
    if before is not None and (before.reason, before.message) == (now.reason, now.message):
        return []
    return [("Warning", now.reason, now.message)]


def budgets_events(previous: DatasetGenerationStatus, status: DatasetGenerationStatus) -> list[Event]:
    """A Warning when a budget goes out of reach of its rows."""
    now = condition(status.conditions, ConditionType.BUDGETS_REACHABLE)
    before = condition(previous.conditions, ConditionType.BUDGETS_REACHABLE)
    if now is not None and now.status == "False" and (before is None or before.status != "False"):
        return [("Warning", now.reason, now.message)]
    return []


def at_budget_events(previous: DatasetGenerationStatus, status: DatasetGenerationStatus) -> list[Event]:
    """A Warning when a replica starts doing otherwise at the budget than the spec says."""
    now = condition(status.conditions, ConditionType.AT_BUDGET)
    before = condition(previous.conditions, ConditionType.AT_BUDGET)
    if now is not None and (before is None or before.message != now.message):
        return [("Warning", now.reason, now.message)]
    return []


def last_ready_reason(previous: DatasetGenerationStatus) -> str | None:
    ready = condition(previous.conditions, ConditionType.READY)
    return ready.reason if ready else None


# --- the status -------------------------------------------------------------------------------------

def status_of(r: Reconcile, found: Findings) -> DatasetGenerationStatus:
    status = counted_status(r, found)
    if found.still_failed:  # a failure stays until the spec changes or a retry is asked
        return r.previous.model_copy(update={"datasets": found.datasets, "tokens": status.tokens,
                                             "progress": status.progress, "estimate": status.estimate,
                                             "retry": r.retry or None})
    shown = phase_of(phase_facts(r, found, status))
    status.phase = shown.phase
    if found.capacity is not None:
        status.ready_replicas = found.capacity.ready
    status.conditions = conditions_of(r, found, status, shown)
    return status


def counted_status(r: Reconcile, found: Findings) -> DatasetGenerationStatus:
    """The status but its phase and conditions: the counts, the times, the Jobs, the findings, the estimate."""
    stage, datasets, previous = found.stage, found.datasets, r.previous
    preflight = preflight_status(r.world.preflight) if r.world.preflight else previous.preflight
    extraction = extraction_status(r.world.extraction) if r.world.extraction else previous.extraction
    return DatasetGenerationStatus(
        stage=stage, observed_generation=r.generation, conditions=list(previous.conditions), datasets=datasets,
        replicas=fold_replicas(r.spec, r.world.reports, replica_nodes(r.world), found.group_restarts),
        tokens=reported_tokens(datasets), budget_tokens=sum(d.budget_tokens for d in datasets),
        progress=progress_text(datasets), start_time=previous.start_time or r.now,
        completion_time=(previous.completion_time or r.now) if stage == Stage.DONE else None,
        preflight=preflight, extraction=extraction, jobs=stage_jobs(r.name, r.spec, stage),
        estimate=estimate(r.spec, preflight, datasets, previous.estimate, r.now,
                          hidden_size=preflight.model.hidden_size if preflight and preflight.model else None,
                          extraction=extraction),
        retry=r.retry or None)


def replica_nodes(world: World) -> dict[int, list[str]]:
    """Each replica's nodes, by its live pods, in rank order."""
    nodes: dict[int, list[str]] = {}
    for pod in sorted(world.pods or (), key=lambda p: (p.rank, p.name)):
        if pod.node and not pod.deleting:
            nodes.setdefault(pod.replica, []).append(pod.node)
    return nodes


def stage_jobs(name: str, spec: DatasetGenerationSpec, stage: Stage) -> StageJobs:
    """The Jobs of the stages reached so far, by name."""
    merged = stage in (Stage.MERGING, Stage.EXTRACTING, Stage.DONE)
    extracted = spec.extraction.enabled and stage in (Stage.EXTRACTING, Stage.DONE)
    return StageJobs(generation=[names.generation_job_name(name, r) for r in range(spec.server.replicas)],
                     merge=names.merge_job_name(name) if merged else None,
                     extract=names.extract_job_name(name) if extracted else None)


def phase_facts(r: Reconcile, found: Findings, status: DatasetGenerationStatus) -> PhaseFacts:
    return PhaseFacts(
        stage=found.stage, failure=found.failure, suspended=r.spec.suspend,
        output_in_use=output_in_use(r) if found.in_use else None, missing_claims=r.world.missing_claims,
        volume_full=found.volume_full,
        extraction_enabled=r.spec.extraction.enabled,
        preflight_refused=r.world.refused_pods.get(names.preflight_job_name(r.name), ""),
        reported=bool(r.world.reports), capacity=found.capacity, stage_job_queued=stage_job_queued(r, found.stage),
        progress=status.progress, budget_tokens=status.budget_tokens)


def conditions_of(r: Reconcile, found: Findings, status: DatasetGenerationStatus,
                  shown: ShownPhase) -> list[Condition]:
    c, now, g = status.conditions, r.now, r.generation
    for setter in (set_ready, set_progressing, set_succeeded, set_failed, set_suspended):
        c = setter(c, shown, now, g)
    if status.preflight is not None and not status.preflight.problem:  # a failed preflight's findings are partial
        c = set_budgets_reachable(c, budgets_out_of_reach(r.spec, status.estimate, status.preflight, found.datasets),
                                  now, g)
    c = set_at_budget(c, replica_notices(r.world), now, g)
    return set_capacity(c, found.capacity, now, g)


def replica_notices(world: World) -> list[str]:
    """Each replica's notices (ProgressDocument.notices), said once for the replicas that share one."""
    said: dict[str, list[int]] = {}
    for replica, report in sorted(world.reports.items()):
        for notice in report.notices:
            said.setdefault(notice, []).append(replica)
    return [f"replicas {', '.join(map(str, rs))}: {notice}" if len(rs) > 1 else f"replica {rs[0]}: {notice}"
            for notice, rs in said.items()]
