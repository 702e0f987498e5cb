"""Writing a decision to the API: create children (owned by the DatasetGeneration), delete Jobs
with Foreground propagation, record events. Every write is idempotent, so a restart repeats safely."""

from __future__ import annotations

import json
import logging
import time

import kopf
from kubernetes import client

from draftgen import server_keys
from draftgen.policies.api_error_policy import ApiError, backoff_s, reason_of
from draftgen.reasons import Reason
from draftgen.reconcile import Decision
from draftgen_contracts import names
from draftgen_contracts.extraction_progress import ExtractionProgress, parse_extraction_progress
from draftgen_contracts.preflight_report import PreflightReport, parse_preflight
from draftgen_contracts.progress import ProgressDocument, parse_progress

log = logging.getLogger("draftgen.operator")


def report_from(configmap) -> ProgressDocument | PreflightReport | ExtractionProgress | None:
    """A report ConfigMap's progress document, the preflight ConfigMap's findings, the extraction's
    progress, or None for other ConfigMaps and empty or bad reports."""
    labels = configmap.get("metadata", {}).get("labels") or {}
    data = configmap.get("data") or {}
    if labels.get(names.LABEL_PREFLIGHT) == "true":
        return parse_preflight(data.get(names.PREFLIGHT_KEY))
    if labels.get(names.LABEL_EXTRACTION) == "true":
        return parse_extraction_progress(data.get(names.EXTRACTION_KEY))
    if labels.get(names.LABEL_REPORT) != "true":
        return None
    return parse_progress(data.get(names.REPORT_KEY))


def _create(namespace: str, obj: dict) -> None:
    kind = obj["kind"]
    if kind == "Secret":  # the run's server keys: made here, written once, never read back
        obj, create = server_keys.filled(obj, server_keys.fresh_keys()), client.CoreV1Api().create_namespaced_secret
    elif kind in ("ServiceAccount", "ConfigMap"):
        core = client.CoreV1Api()
        create = core.create_namespaced_service_account if kind == "ServiceAccount" else core.create_namespaced_config_map
    elif kind in ("Role", "RoleBinding"):
        rbac = client.RbacAuthorizationV1Api()
        create = rbac.create_namespaced_role if kind == "Role" else rbac.create_namespaced_role_binding
    elif kind == "Job":
        create = client.BatchV1Api().create_namespaced_job
    elif kind == "NetworkPolicy":
        create = client.NetworkingV1Api().create_namespaced_network_policy
    elif kind == "Service":
        create = client.CoreV1Api().create_namespaced_service
    else:
        raise ValueError(f"no creator for {kind}")
    try:
        create(namespace, obj)
        log.info("created %s %s/%s", kind, namespace, obj["metadata"]["name"])
    except client.ApiException as e:
        if not already_exists(e):  # a restart or a stale index, not a problem
            raise


def already_exists(e: client.ApiException) -> bool:
    """A create refused because the object is there; not any 409 (a webhook may answer 409 too)."""
    try:
        return e.status == 409 and json.loads(e.body).get("reason") == Reason.ALREADY_EXISTS
    except (TypeError, ValueError, AttributeError):
        return False


def delete_job(namespace: str, name: str) -> None:
    """Foreground: the Job stays until its pods are gone, so its name is not reused too early."""
    try:
        client.BatchV1Api().delete_namespaced_job(name, namespace,
                                                  body=client.V1DeleteOptions(propagation_policy="Foreground"))
        log.info("deleted Job %s/%s", namespace, name)
    except client.ApiException as e:
        if e.status != 404:
            raise


def server_message(e: Exception) -> tuple[int, str]:
    """(HTTP status, the API server's own message) of a failed request; (0, the error) without an answer."""
    if not isinstance(e, client.ApiException):
        return 0, f"{type(e).__name__}: {e}"
    try:
        return e.status, json.loads(e.body)["message"]
    except (TypeError, ValueError, KeyError):
        return e.status, e.reason or str(e)


class Refusals:
    """The writes the API server refused, per object, with the time each may be tried again
    (policies/api_error_policy.backoff_s); kept in memory: a restarted operator simply tries at once."""

    def __init__(self) -> None:
        self._by_key: dict[tuple, tuple[ApiError, int, float]] = {}  # key -> (last error, failures, next try)

    def due(self, key: tuple, now: float) -> bool:
        return key not in self._by_key or self._by_key[key][2] <= now

    def refused(self, key: tuple, error: ApiError, now: float) -> bool:
        """Record a refusal; True when it is new (not the same refusal again)."""
        last, failures, _ = self._by_key.get(key, (None, 0, 0.0))
        self._by_key[key] = (error, failures + 1, now + backoff_s(failures + 1))
        return last is None or last.status != error.status

    def accepted(self, key: tuple) -> None:
        self._by_key.pop(key, None)

    def pending(self, owner: tuple, now: float) -> list[tuple[ApiError, float]]:
        """This owner's writes still refused, each with the seconds until it is tried again."""
        return [(e, max(0.0, at - now)) for key, (e, _, at) in sorted(self._by_key.items(), key=lambda kv: kv[0])
                if key[:2] == owner]

    def forget(self, owner: tuple) -> None:
        for key in [k for k in self._by_key if k[:2] == owner]:
            del self._by_key[key]


REFUSALS = Refusals()


def _attempt(owner_body, key: tuple, write, now: float) -> None:
    """One write, unless its backoff is not over; a refusal is recorded under `key` (namespace,
    owner, verb, kind, child), said on the object, and never only in this log."""
    if not REFUSALS.due(key, now):
        return
    try:
        write()
    except Exception as e:
        error = ApiError(*key[2:], *server_message(e))
        log.warning("%s", error.says())
        if REFUSALS.refused(key, error, now):
            kopf.event(owner_body, type="Warning", reason=reason_of(error), message=error.says())
    else:
        REFUSALS.accepted(key)


def apply_decision(owner, namespace: str, decision: Decision) -> list[tuple[ApiError, float]]:
    """Try every write of the decision (those refused lately only once their backoff is over);
    what is still refused, for the status (draftgen.refusals)."""
    name, now = owner["metadata"]["name"], time.monotonic()
    for job in decision.delete_jobs:
        _attempt(owner, (namespace, name, "delete", "Job", job), lambda job=job: delete_job(namespace, job), now)
    for obj in decision.create:
        # Owner references only: kopf.adopt() would also copy the owner's labels (GitOps tracking labels
        # included). The output lock has none: it outlives the object, as the data does (plan.output_lock).
        if names.LABEL_OUTPUT_LOCK not in obj["metadata"]["labels"]:
            kopf.append_owner_reference(obj, owner=owner)
        obj["metadata"]["namespace"] = namespace
        _attempt(owner, (namespace, name, "create", obj["kind"], obj["metadata"]["name"]),
                 lambda obj=obj: _create(namespace, obj), now)
    for type_, reason, message in decision.events:
        kopf.event(owner, type=type_, reason=reason, message=message)
    return REFUSALS.pending((namespace, name), now)
