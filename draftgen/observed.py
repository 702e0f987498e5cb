"""What the operator observed of the world, reduced to what its decisions need (no API objects)."""

from __future__ import annotations

import re

from dataclasses import dataclass, field

from draftgen_contracts.names import (COMPLETION_INDEX_ANNOTATION, CONFIG_HASH_ANNOTATION, KUEUE_QUEUE_LABEL,
                                     LABEL_COMPONENT, LABEL_REPLICA)
from draftgen_contracts.extraction_progress import ExtractionProgress
from draftgen_contracts.preflight_report import PreflightReport
from draftgen_contracts.progress import ProgressDocument

from .reasons import Reason


@dataclass(frozen=True)
class JobState:
    name: str
    component: str  # generate, merge, extract
    config_hash: str | None = None
    active: int = 0
    succeeded: bool = False  # the Job's Complete condition
    failed: bool = False  # the Job's Failed condition
    failure_reason: str = ""
    failure_message: str = ""
    failed_at: str = ""  # its Failed condition's lastTransitionTime (RFC 3339)
    deleting: bool = False
    created_at: str = ""  # metadata.creationTimestamp (RFC 3339)
    suspended: bool = False  # spec.suspend (e.g. queued in Kueue): it makes no pods
    suspended_since: str = ""  # its Suspended condition's lastTransitionTime (RFC 3339); "" when not suspended
    queue: str = ""  # its Kueue LocalQueue (label kueue.x-k8s.io/queue-name); "" when not queued
    uid: str = ""
    replica: int | None = None  # a generation Job's replica (label draftgen.io/replica)

    def why_failed(self) -> str:
        """Kubernetes' reason for the Job's failure, with its message when it has one."""
        return f"{self.failure_reason}: {self.failure_message}" if self.failure_message else self.failure_reason


@dataclass(frozen=True)
class PodState:
    """A generation pod, as far as waiting for it goes."""

    name: str
    replica: int
    scheduled: bool = False
    ready: bool = False
    problem_reason: str = ""  # Unschedulable, ErrImagePull, ImagePullBackOff, CrashLoopBackOff, ...
    problem_message: str = ""  # the scheduler's or the kubelet's own words
    deleting: bool = False
    node: str = ""  # the node it was scheduled to
    rank: int = 0  # its index in a rank group's Indexed Job (0 for a single-node replica's pod)
    failure: str = ""  # a container that failed: its name, exit code and last words (its termination message)


# Container waiting reasons that mean the pod will not start by itself soon.
STUCK_WAITING = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                 "CreateContainerError", "CrashLoopBackOff", "RunContainerError")


def _last_exit(container_status: dict) -> str:
    """How a restarted container last ended (a crash loop's cause is in its exit code)."""
    last = ((container_status.get("lastState") or {}).get("terminated")) or {}
    if not container_status.get("restartCount") or "exitCode" not in last:
        return ""
    return f" (restarted {container_status['restartCount']} times, last exit code {last['exitCode']})"


def pod_state_from(pod: dict) -> PodState:
    """A v1 Pod (as a dict) -> PodState."""
    meta, status = pod.get("metadata", {}), pod.get("status") or {}
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    scheduled = (conditions.get("PodScheduled") or {}).get("status") == "True"
    ready = (conditions.get("Ready") or {}).get("status") == "True"
    reason = message = ""
    if not scheduled and "PodScheduled" in conditions:
        reason = conditions["PodScheduled"].get("reason") or Reason.UNSCHEDULABLE
        message = conditions["PodScheduled"].get("message") or ""
    for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK_WAITING:
            reason = waiting["reason"]
            message = f"container {cs.get('name')}: {waiting.get('message') or waiting['reason']}{_last_exit(cs)}"
            break
    failure = next((_failure(cs) for cs in [*(status.get("initContainerStatuses") or []),
                                             *(status.get("containerStatuses") or [])] if _failure(cs)), "")
    replica = (meta.get("labels") or {}).get(LABEL_REPLICA, "0")
    return PodState(name=meta.get("name", ""), replica=int(replica) if replica.isdigit() else 0, scheduled=scheduled,
                    ready=ready, problem_reason=reason, problem_message=message,
                    deleting=meta.get("deletionTimestamp") is not None, node=(pod.get("spec") or {}).get("nodeName") or "",
                    failure=failure, rank=_completion_index(meta))


def _completion_index(meta: dict) -> int:
    """The pod's index in its Indexed Job, from the annotation the Job controller sets."""
    value = (meta.get("annotations") or {}).get(COMPLETION_INDEX_ANNOTATION, "0")
    return int(value) if value.isdigit() else 0


def _failure(container_status: dict) -> str:
    """A container that ended with a non-zero exit code, and what it said (its last line), else ""."""
    ended = (container_status.get("state") or {}).get("terminated") or {}
    if not ended.get("exitCode"):
        return ""
    said = (ended.get("message") or "").strip().splitlines()
    return f"container {container_status.get('name')} exited {ended['exitCode']}" + (f": {said[-1]}" if said else "")


@dataclass(frozen=True)
class World:
    jobs: dict[str, JobState] = field(default_factory=dict)
    reports: dict[int, ProgressDocument] = field(default_factory=dict)  # replica -> its last report
    existing: frozenset[tuple[str, str]] = frozenset()  # (kind, name) of setup objects present
    missing_claims: tuple[str, ...] = ()
    output_owner: str | None = None  # the DatasetGeneration its output folder's lock names; None: no lock yet
    # The generation pods and the generation Jobs' last FailedCreate message, where they can be
    # observed (the operator); None: not observed (the local executor has processes, not pods).
    pods: tuple[PodState, ...] | None = None
    refused_pods: dict[str, str] = field(default_factory=dict)  # Job name -> its last FailedCreate event's message
    # Job name -> why Kueue has not admitted it, in Kueue's words (its Workload's QuotaReserved message),
    # for the suspended Jobs of a queue; empty where not observed.
    queue_waits: dict[str, str] = field(default_factory=dict)
    preflight: PreflightReport | None = None  # the preflight's findings, once it has published them
    extraction: ExtractionProgress | None = None  # the extraction's last progress report


EXIT_CODE = re.compile(r"failed with exit code (\d+)")


def failed_exit_code(job: JobState) -> int | None:
    """The exit code a podFailurePolicy rule failed the Job on (Kubernetes' message says it), else None."""
    found = EXIT_CODE.search(job.failure_message) if job.failure_reason == Reason.POD_FAILURE_POLICY else None
    return int(found.group(1)) if found else None


def job_state_from(job: dict) -> JobState:
    """A batch/v1 Job (as a dict, e.g. from a kopf index or the API) -> JobState."""
    meta, status = job.get("metadata", {}), job.get("status") or {}
    conditions = {c["type"]: c for c in status.get("conditions") or [] if c.get("status") == "True"}
    failed = conditions.get("Failed")
    suspended = bool((job.get("spec") or {}).get("suspend"))
    # The Job controller sets Suspended a moment after the spec says so; until then, since its creation.
    since = (conditions.get("Suspended") or {}).get("lastTransitionTime") or meta.get("creationTimestamp") or ""
    return JobState(
        name=meta["name"], component=(meta.get("labels") or {}).get(LABEL_COMPONENT, ""),
        config_hash=(meta.get("annotations") or {}).get(CONFIG_HASH_ANNOTATION),
        active=status.get("active") or 0, succeeded="Complete" in conditions, failed=failed is not None,
        failure_reason=(failed or {}).get("reason", ""), failure_message=(failed or {}).get("message", ""),
        failed_at=(failed or {}).get("lastTransitionTime", ""), deleting=meta.get("deletionTimestamp") is not None, created_at=meta.get("creationTimestamp") or "",
        suspended=suspended, suspended_since=since if suspended else "",
        queue=(meta.get("labels") or {}).get(KUEUE_QUEUE_LABEL, ""), uid=meta.get("uid", ""),
        replica=_replica_label(meta))


def _replica_label(meta: dict) -> int | None:
    value = (meta.get("labels") or {}).get(LABEL_REPLICA, "")
    return int(value) if value.isdigit() else None
