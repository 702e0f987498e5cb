"""The kopf handlers: read the world from in-memory indexes, call draftgen.reconcile.decide, write.

Every DatasetGeneration is reconciled on create, on a spec change, on operator start, and on a
timer every FOLD_INTERVAL seconds; the timer is what folds the pods' reports into status. Indexes
(kept current by watches) make a tick cost no API read; a tick writes only what changed.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime

import kopf
from kubernetes import client, config
from pydantic import ValidationError

from draftgen import plan
from draftgen.api import DatasetGenerationSpec, DatasetGenerationStatus
from draftgen.observed import JobState, World, job_state_from, pod_state_from
from draftgen.reasons import Reason
from draftgen.reconcile import decide
from draftgen.refusals import with_refusals
from draftgen_contracts import names
from draftgen_contracts.extraction_progress import ExtractionProgress
from draftgen_contracts.preflight_report import PreflightReport
from draftgen_contracts.progress import ProgressDocument
from draftgen_contracts.states import Component, Phase
from draftgen_contracts.timestamps import utc_now_iso
from draftgen_contracts.validation import error_lines

from . import metrics
from .apply import REFUSALS, apply_decision, report_from

log = logging.getLogger("draftgen.operator")
FOLD_INTERVAL = float(os.environ.get("DRAFTGEN_FOLD_INTERVAL", "2"))


def settings_from_env() -> plan.OperatorSettings:
    extra = os.environ.get("DRAFTGEN_EXTRA_POD_LABELS", "")
    pairs = tuple(tuple(kv.split("=", 1)) for kv in extra.split(",") if "=" in kv)
    peers = json.loads(os.environ.get("DRAFTGEN_METRICS_FROM") or "[]")  # the chart's networkPolicy.metricsFrom
    pulls = json.loads(os.environ.get("DRAFTGEN_RUN_IMAGE_PULL_SECRETS") or "[]")  # the chart's runImagePullSecrets
    return plan.OperatorSettings(runner_image=os.environ.get("DRAFTGEN_RUNNER_IMAGE", plan.OperatorSettings.runner_image),
                                 extra_pod_labels=pairs, metrics_from=tuple(json.dumps(p, sort_keys=True) for p in peers),
                                 server_metrics=os.environ.get("DRAFTGEN_SERVER_METRICS") == "1",
                                 image_pull_secrets=tuple(s["name"] for s in pulls),
                                 volume_full_retry_s=float(os.environ.get("DRAFTGEN_VOLUME_FULL_RETRY") or 300))


SETTINGS = settings_from_env()
RESTRICTED = False  # set by `draftgen operator --namespace`: watch only the given namespaces
OWNED = {names.LABEL_NAME: kopf.PRESENT}


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    # Handler progress in annotations under our own prefix; status belongs to draftgen alone.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="draftgen.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="draftgen.io")
    settings.posting.level = logging.WARNING  # events: ours, and kopf's warnings, not every handler's success
    settings.watching.server_timeout = 270  # re-list regularly: the usual cure for a frozen watch
    settings.execution.max_workers = 8
    # With namespaces given, kopf's restricted mode: no cluster-wide namespace scan, so the chart's
    # namespaced RBAC needs no cluster-scope read.
    settings.scanning.disabled = RESTRICTED


# --- indexes: the observed world, kept current by watches -------------------------------------------

@kopf.index("batch", "v1", "jobs", labels=OWNED)
def jobs_index(namespace, labels, body, **_):
    return {(namespace, labels[names.LABEL_NAME]): job_state_from(dict(body))}


@kopf.index("", "v1", "configmaps", labels=OWNED)
def configmaps_index(namespace, labels, name, body, **_):
    return {(namespace, labels[names.LABEL_NAME]): (name, report_from(body))}


@kopf.index("", "v1", "configmaps", labels={names.LABEL_OUTPUT_LOCK: "true"})
def output_locks_index(namespace, name, body, **_):
    return {(namespace, name): (body.get("data") or {}).get("owner")}


@kopf.index("", "v1", "serviceaccounts", labels=OWNED)
def serviceaccounts_index(namespace, labels, name, **_):
    return {(namespace, labels[names.LABEL_NAME]): ("ServiceAccount", name)}


@kopf.index("rbac.authorization.k8s.io", "v1", "roles", labels=OWNED)
def roles_index(namespace, labels, name, **_):
    return {(namespace, labels[names.LABEL_NAME]): ("Role", name)}


@kopf.index("rbac.authorization.k8s.io", "v1", "rolebindings", labels=OWNED)
def rolebindings_index(namespace, labels, name, **_):
    return {(namespace, labels[names.LABEL_NAME]): ("RoleBinding", name)}


@kopf.index("", "v1", "pods", labels={**OWNED, names.LABEL_COMPONENT: Component.GENERATE})
def generation_pods_index(namespace, labels, body, **_):
    return {(namespace, labels[names.LABEL_NAME]): pod_state_from(dict(body))}


@kopf.index("", "v1", "persistentvolumeclaims")
def claims_index(namespace, name, **_):
    return {namespace: name}


def refused_pods(namespace: str, job: JobState) -> str:
    """The message of the Job's latest FailedCreate event (the pods the API server refused it: a quota,
    Pod Security), if newer than the Job (events outlive their Job). Read only for a generation Job
    that has no pod, so a tick of a healthy run makes no API read; watching every event of the
    namespace instead slowed the operator's timers (bench/operator_latency.py)."""
    selector = f"involvedObject.kind=Job,involvedObject.name={job.name},reason={Reason.FAILED_CREATE}"
    try:
        events = client.CoreV1Api().list_namespaced_event(namespace, field_selector=selector).items
    except client.ApiException as e:
        log.warning("events of Job %s/%s not read: %s", namespace, job.name, e.reason)
        return ""
    created = datetime.fromisoformat(job.created_at.replace("Z", "+00:00")) if job.created_at else None
    said = [(at, e.message or "") for e in events
            if (at := e.last_timestamp or e.event_time or e.metadata.creation_timestamp) is not None
            and (created is None or at >= created)]
    return max(said)[1] if said else ""


KUEUE_WORKLOADS = ("kueue.x-k8s.io", "v1beta2", "workloads")


def kueue_says(namespace: str, job: JobState) -> str:
    """Why Kueue holds a queued Job, in its words: its Workload's Evicted message (a preemption) or
    its QuotaReserved=False message ("insufficient unused quota ..."). Read only for a suspended Job
    of a queue; "" when Kueue is not installed or the operator may not read Workloads."""
    try:
        found = client.CustomObjectsApi().list_namespaced_custom_object(
            *KUEUE_WORKLOADS[:2], namespace, KUEUE_WORKLOADS[2], label_selector=f"kueue.x-k8s.io/job-uid={job.uid}")
    except client.ApiException as e:
        log.debug("Workloads of Job %s/%s not read: %s", namespace, job.name, e.reason)
        return ""
    for workload in found.get("items") or []:
        conditions = {c["type"]: c for c in (workload.get("status") or {}).get("conditions") or []}
        for type_, status in (("Evicted", "True"), ("QuotaReserved", "False")):
            c = conditions.get(type_)
            if c is not None and c.get("status") == status and c.get("message"):
                return c["message"]
    return ""


def awaits_pods(job: JobState, with_pods: set[str]) -> bool:
    """A Job whose pods may have been refused: a generation Job without a pod, or a preflight Job
    with none active that has not finished (its pods are not watched), neither deleted nor queued."""
    if job.deleting or job.suspended:
        return False
    if job.component == Component.GENERATE:
        return job.name not in with_pods
    return job.component == Component.PREFLIGHT and not job.active and not job.succeeded and not job.failed


def observe(namespace: str, name: str, spec: DatasetGenerationSpec, indexes) -> World:
    key = (namespace, name)
    configmaps = list(indexes["configmaps_index"].get(key, []))
    reports = {r.replica: r for _, r in configmaps if isinstance(r, ProgressDocument)}
    preflight = next((r for _, r in configmaps if isinstance(r, PreflightReport)), None)
    extraction = next((r for _, r in configmaps if isinstance(r, ExtractionProgress)), None)
    existing = {("ConfigMap", n) for n, _ in configmaps}
    for index in ("serviceaccounts_index", "roles_index", "rolebindings_index"):
        existing |= set(indexes[index].get(key, []))
    claims = set(indexes["claims_index"].get(namespace, []))
    missing = tuple(c for c in dict.fromkeys([spec.output.claim_name, spec.model.claim_name]) if c not in claims)
    jobs = {j.name: j for j in indexes["jobs_index"].get(key, [])}
    pods = tuple(indexes["generation_pods_index"].get(key, []))
    with_pods = {names.generation_job_name(name, p.replica) for p in pods}
    refused = {job.name: said for job in jobs.values() if awaits_pods(job, with_pods)
               and (said := refused_pods(namespace, job))}
    lock = names.output_lock_name(spec.output.claim_name, spec.output.path or name)
    owner = next(iter(indexes["output_locks_index"].get((namespace, lock), [])), None)
    queue_waits = {job.name: said for job in jobs.values() if job.queue and job.suspended and not job.deleting
                   and (said := kueue_says(namespace, job))}
    return World(jobs=jobs, reports=reports, existing=frozenset(existing), missing_claims=missing,
                 output_owner=owner, pods=pods, refused_pods=refused, queue_waits=queue_waits, preflight=preflight,
                 extraction=extraction)


# --- reconcile ------------------------------------------------------------------------------------

def reconcile(body, spec, status, name, namespace, meta, patch, **kwargs):
    indexes = {k: v for k, v in kwargs.items() if k.endswith("_index")}
    previous = DatasetGenerationStatus.model_validate(dict(status or {}))
    try:
        parsed = DatasetGenerationSpec.model_validate(dict(spec))
    except ValidationError as e:  # admission normally refuses this; never crash-loop on it
        problems = "; ".join(error_lines(e, "spec"))
        patch.status["phase"] = Phase.FAILED
        kopf.warn(body, reason=Reason.INVALID_SPEC, message=problems)
        return
    try:
        now, generation = utc_now_iso(), meta.get("generation", 1)
        world = observe(namespace, name, parsed, indexes)
        retry = (meta.get("annotations") or {}).get(names.RETRY_ANNOTATION, "")
        decision = decide(name, namespace, generation, parsed, previous, world, SETTINGS, now, retry)
        refused = apply_decision(body, namespace, decision)
    except Exception:
        metrics.RECONCILE_ERRORS.labels(namespace, name).inc()
        raise
    if refused:
        metrics.RECONCILE_ERRORS.labels(namespace, name).inc()
    status = with_refusals(decision.status, refused, now, generation)
    new = status.model_dump(by_alias=True, mode="json")
    if new != previous.model_dump(by_alias=True, mode="json"):
        patch.status.update(new)
    metrics.observe(namespace, name, status, indexes["jobs_index"].get((namespace, name), []),
                    metrics.gpus_held(world.pods, parsed.server.gpus_per_replica))


RESOURCE = (names.GROUP, names.VERSION, names.PLURAL)
kopf.on.create(*RESOURCE, id="reconcile-on-create")(reconcile)
kopf.on.update(*RESOURCE, field="spec", id="reconcile-on-spec-change")(reconcile)
kopf.on.resume(*RESOURCE, id="reconcile-on-resume")(reconcile)
kopf.timer(*RESOURCE, interval=FOLD_INTERVAL, sharp=True, id="fold")(reconcile)


@kopf.on.delete(names.GROUP, names.VERSION, names.PLURAL, optional=True)
def forget(name, namespace, **_):
    """Children go by owner references (the data volume has none, so it stays); metrics go here."""
    metrics.forget(namespace, name)
    REFUSALS.forget((namespace, name))
