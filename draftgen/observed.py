"""What the operator observed of the world, reduced to what its decisions need (no API objects)."""

from __future__ import annotations

from dataclasses import dataclass, field

from draftgen_contracts.names import CONFIG_HASH_ANNOTATION, LABEL_COMPONENT
from draftgen_contracts.progress import ProgressDocument


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
    deleting: bool = False


@dataclass(frozen=True)
class World:
    jobs: dict[str, JobState] = field(default_factory=dict)
    reports: dict[int, ProgressDocument] = field(default_factory=dict)  # replica -> its last report
    existing: frozenset[tuple[str, str]] = frozenset()  # (kind, name) of setup objects present
    missing_claims: tuple[str, ...] = ()


def job_state_from(job: dict) -> JobState:
    """A batch/v1 Job (as a dict, e.g. from a kopf index or the API) -> JobState."""
    meta, status = job.get("metadata", {}), job.get("status") or {}
    conditions = {c["type"]: c for c in status.get("conditions") or [] if c.get("status") == "True"}
    failed = conditions.get("Failed")
    return JobState(
        name=meta["name"], component=(meta.get("labels") or {}).get(LABEL_COMPONENT, ""),
        config_hash=(meta.get("annotations") or {}).get(CONFIG_HASH_ANNOTATION),
        active=status.get("active") or 0, succeeded="Complete" in conditions, failed=failed is not None,
        failure_reason=(failed or {}).get("reason", ""), failure_message=(failed or {}).get("message", ""),
        deleting=meta.get("deletionTimestamp") is not None)
