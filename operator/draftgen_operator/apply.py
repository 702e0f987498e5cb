"""Writing a decision to the API: create children (owned by the DatasetGeneration), delete Jobs
with Foreground propagation, record events. Every write is idempotent, so a restart repeats safely."""

from __future__ import annotations

import logging

import kopf
from kubernetes import client

from draftgen.reconcile import Decision
from draftgen_contracts import names
from draftgen_contracts.progress import ProgressDocument, parse_progress

log = logging.getLogger("draftgen.operator")


def report_from(configmap) -> ProgressDocument | None:
    """A report ConfigMap's progress document, or None for other ConfigMaps and empty or bad reports."""
    labels = configmap.get("metadata", {}).get("labels") or {}
    if labels.get(names.LABEL_REPORT) != "true":
        return None
    return parse_progress((configmap.get("data") or {}).get(names.REPORT_KEY))


def _create(namespace: str, obj: dict) -> None:
    kind = obj["kind"]
    if kind in ("ServiceAccount", "ConfigMap"):
        core = client.CoreV1Api()
        create = core.create_namespaced_service_account if kind == "ServiceAccount" else core.create_namespaced_config_map
    elif kind in ("Role", "RoleBinding"):
        rbac = client.RbacAuthorizationV1Api()
        create = rbac.create_namespaced_role if kind == "Role" else rbac.create_namespaced_role_binding
    elif kind == "Job":
        create = client.BatchV1Api().create_namespaced_job
    else:
        raise ValueError(f"no creator for {kind}")
    try:
        create(namespace, obj)
        log.info("created %s %s/%s", kind, namespace, obj["metadata"]["name"])
    except client.ApiException as e:
        if e.status != 409:  # already there: a restart or a stale index, not a problem
            raise


def delete_job(namespace: str, name: str) -> None:
    """Foreground: the Job stays until its pods are gone, so its name is not reused too early."""
    try:
        client.BatchV1Api().delete_namespaced_job(name, namespace,
                                                  body=client.V1DeleteOptions(propagation_policy="Foreground"))
        log.info("deleted Job %s/%s", namespace, name)
    except client.ApiException as e:
        if e.status != 404:
            raise


def apply_decision(owner, namespace: str, decision: Decision) -> None:
    for name in decision.delete_jobs:
        delete_job(namespace, name)
    for obj in decision.create:
        # Owner references only: kopf.adopt() would also copy the owner's labels (GitOps tracking labels included).
        kopf.append_owner_reference(obj, owner=owner)
        obj["metadata"]["namespace"] = namespace
        _create(namespace, obj)
    for type_, reason, message in decision.events:
        kopf.event(owner, type=type_, reason=reason, message=message)
