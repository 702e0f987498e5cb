"""Every reason the product puts on a condition or an event, and its message where the message is
fixed or a template: one table to read, as JobSet's pkg/constants/constants.go.

A `Reason` is a string enum, so it compares and serializes as the string the API carries. An
`Explanation` is a reason with its message, as one condition or one event says them; the fixed ones
are constants here, the templated ones functions of what they name. Nothing below draftgen writes a
reason, so the table lives here rather than in draftgen_contracts.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class Reason(StrEnum):
    # Where the run stands: conditions Ready and Progressing (and Succeeded, Suspended, Failed).
    PREFLIGHT = "Preflight"
    WAITING_FOR_SERVERS = "WaitingForServers"
    GENERATING = "Generating"
    BUDGETS_MET = "BudgetsMet"  # also the event of generation's end
    QUEUED = "Queued"  # also a replica's wait in condition Capacity
    EXTRACTING = "Extracting"
    SUCCEEDED = "Succeeded"  # also the event of the last stage's end
    SUSPENDED = "Suspended"  # also the event of suspension deleting Jobs
    NOT_SUSPENDED = "NotSuspended"
    NOT_FAILED = "NotFailed"
    OUTPUT_IN_USE = "OutputInUse"  # also its Warning event
    VOLUME_MISSING = "VolumeMissing"
    VOLUME_FULL = "VolumeFull"  # also its Warning event
    GROUP_RESTARTED = "GroupRestarted"  # a Warning event: a replica across nodes failed and starts again
    RETRIED = "Retried"  # a Normal event: a new draftgen.io/retry value retried a Failed run
    STOPPED_SHORT = "StoppedShort"  # a Warning event: a replica's Job completed with work left; created again
    # A stage left (Normal events).
    PREFLIGHT_PASSED = "PreflightPassed"
    MERGE_SUCCEEDED = "MergeSucceeded"
    EXTRACTION_ENABLED = "ExtractionEnabled"
    REOPENED = "Reopened"
    # The run failed (condition Failed, a Warning event).
    PREFLIGHT_FAILED = "PreflightFailed"
    GENERATION_JOB_FAILED = "GenerationJobFailed"
    MERGE_JOB_FAILED = "MergeJobFailed"
    EXTRACTION_JOB_FAILED = "ExtractionJobFailed"
    JOB_FAILED = "JobFailed"  # a Job of no known component
    PODS_REFUSED = "PodsRefused"  # also a replica's wait in Capacity, and the preflight's while Pending
    # Condition BudgetsReachable.
    BUDGET_OUT_OF_REACH = "BudgetOutOfReach"  # also its Warning event
    ROWS_SUFFICE = "RowsSuffice"
    # Condition AtBudget (and its Warning event): a replica cannot cut at the budget.
    CUT_OFF = "CutOff"
    # Condition Capacity; a replica not ready may also wait with Kubernetes' own reason (ImagePullBackOff).
    ALL_REPLICAS_READY = "AllReplicasReady"
    STARTING = "Starting"
    UNSCHEDULABLE = "Unschedulable"  # the scheduler's, where its condition names none
    # A write the API server refused (condition Blocked, or Failed when permanent; a Warning event).
    CHILD_INVALID = "ChildInvalid"
    ADMISSION_DENIED = "AdmissionDenied"
    QUOTA_EXCEEDED = "QuotaExceeded"
    FORBIDDEN = "Forbidden"
    CONFLICT = "Conflict"
    THROTTLED = "Throttled"
    API_UNAVAILABLE = "ApiUnavailable"
    NOT_BLOCKED = "NotBlocked"
    # A spec that admission let through and the operator cannot parse (a Warning event).
    INVALID_SPEC = "InvalidSpec"
    # A Job's Failed condition, in Kubernetes' words; the local executor words its Jobs the same.
    POD_FAILURE_POLICY = "PodFailurePolicy"
    BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
    SERVER_FAILED = "ServerFailed"  # the local executor's: the shared server a generation Job used died
    # Kubernetes' reasons the operator reads.
    FAILED_CREATE = "FailedCreate"  # a Job's event: its pods refused by the API server
    ALREADY_EXISTS = "AlreadyExists"  # a create's 409: the child is there already


class Explanation(NamedTuple):
    """A reason and its message, as a condition or an event carries them."""

    reason: str  # a Reason, or Kubernetes' own (a pod's ImagePullBackOff)
    message: str


# --- a stage left -------------------------------------------------------------------------------

PREFLIGHT_PASSED = Explanation(Reason.PREFLIGHT_PASSED, "model, tokenizer and datasets checked on the CPU "
                                                        "(status.preflight, status.estimate); the generation Jobs "
                                                        "follow, once spec.suspend is false")
GENERATION_ENDED = Explanation(Reason.BUDGETS_MET, "every dataset met its budget or ran out of prompts; "
                                                   "generation Jobs deleted to free the GPUs")
MERGED_FOR_EXTRACTION = Explanation(Reason.MERGE_SUCCEEDED, "corpus merged; extracting hidden states")
MERGED_LAST = Explanation(Reason.SUCCEEDED, "corpus merged")
EXTRACTED = Explanation(Reason.SUCCEEDED, "hidden states extracted")
EXTRACTION_ENABLED = Explanation(Reason.EXTRACTION_ENABLED, "extracting hidden states")
REOPENED = Explanation(Reason.REOPENED, "a dataset is below its budget again; generation resumes from its output")

# --- where the run stands -------------------------------------------------------------------------

SUSPEND_REQUESTED = Explanation(Reason.SUSPENDED, "spec.suspend is true: no GPU Job runs (the CPU preflight does, and "
                                                   "with it status.preflight and status.estimate); all data is kept")
CHECKING_PREFLIGHT = Explanation(Reason.PREFLIGHT, "checking the model, the tokenizer and the datasets on the CPU "
                                                   "before any GPU is asked for")
SERVERS_STARTING = Explanation(Reason.WAITING_FOR_SERVERS, "generation pods are starting their servers")
# The reason records why generation ended and the GPUs were released.
MERGING_CORPUS = Explanation(Reason.BUDGETS_MET, "every dataset met its budget or ran out of prompts; "
                                                 "generation Jobs deleted; merging the corpus")
EXTRACTING_HIDDEN_STATES = Explanation(Reason.EXTRACTING, "extracting hidden states")
ROWS_SUFFICE = Explanation(Reason.ROWS_SUFFICE, "every dataset's usable rows may reach its budget")


def succeeded(extracted: bool) -> Explanation:
    return Explanation(Reason.SUCCEEDED, "corpus ready" + (" and hidden states extracted" if extracted else ""))


def generating(progress: str, budget_tokens: int) -> Explanation:
    return Explanation(Reason.GENERATING, f"{progress} of {budget_tokens} tokens")


def output_in_use(folder: str, owner: str, lock: str) -> Explanation:
    return Explanation(Reason.OUTPUT_IN_USE, f"output folder {folder} belongs to DatasetGeneration {owner} "
                                             f"(ConfigMap {lock}); this one runs nothing and touches none of its "
                                             f"data: give it another output.path")


def volume_missing(claims: tuple[str, ...]) -> Explanation:
    return Explanation(Reason.VOLUME_MISSING, ", ".join(f"PersistentVolumeClaim {c} not found" for c in claims))


def volume_full(claim: str, job: str, needed: str, retry_s: float) -> Explanation:
    """`needed`: what the stage said it still needs, or "" when it said nothing."""
    more = f"; {needed}" if needed else ""
    return Explanation(Reason.VOLUME_FULL, f"the output volume (PersistentVolumeClaim {claim}) is full: Job {job} "
                       f"stopped, keeping everything it wrote{more}. Make room or expand the claim: the Job is "
                       f"created again every {retry_s:.0f} s until it finds room, and resumes")


def preflight_pods_refused(said: str) -> Explanation:
    """The preflight's pods refused by something that may clear (a quota): the run waits."""
    return Explanation(Reason.PODS_REFUSED, f"the preflight Job's pods are refused: {said}")


def retried(value: str, jobs: list[str]) -> Explanation:
    gone = f"deleted {', '.join(jobs)}, which start again and resume from the output" if jobs else "nothing to delete"
    return Explanation(Reason.RETRIED, f"retrying (draftgen.io/retry={value}): {gone}")


def stopped_short(jobs: list[str]) -> Explanation:
    return Explanation(Reason.STOPPED_SHORT, f"{', '.join(jobs)} completed though its replica's last report has rows "
                       "left (its pod was stopped, and exited 0): created again, it resumes from the output")


def suspended_jobs_deleted(jobs: list[str]) -> Explanation:
    return Explanation(Reason.SUSPENDED, f"deleted {', '.join(jobs)}; data kept")


# --- why the run failed ---------------------------------------------------------------------------

def group_restarted(replica: int, nodes: int, job: str, why: str, restart: int, limit: int) -> Explanation:
    return Explanation(Reason.GROUP_RESTARTED, f"replica {replica}: a rank of its {nodes}-node group failed (Job {job}: "
                       f"{why or 'no reason given'}); the whole group starts again and resumes from its output "
                       f"(group restart {restart} of {limit})")


def job_failed(reason: Reason, job: str, why: str) -> Explanation:
    return Explanation(reason, f"Job {job} failed ({why or 'no reason given'})")


def replica_pods_refused_for_good(replica: int, said: str) -> Explanation:
    return Explanation(Reason.PODS_REFUSED, f"replica {replica}: {said}")


def preflight_pods_refused_for_good(said: str) -> Explanation:
    return Explanation(Reason.PODS_REFUSED, f"preflight: {said}")


def with_pod_errors(failure: Explanation, errors: list[str]) -> Explanation:
    """A failure with what the pods said beside what Kubernetes says."""
    return Explanation(failure.reason, f"{failure.message}; {'; '.join(errors)}") if errors else failure


# --- condition Capacity ---------------------------------------------------------------------------

POD_BEING_CREATED = Explanation(Reason.STARTING, "its pod is being created")
SERVER_LOADING = Explanation(Reason.STARTING, "its server is loading the model")
AWAITING_SCHEDULER = Explanation(Reason.STARTING, "its pod waits for the scheduler")


def queued(job: str, queue: str, since: str, kueue_says: str = "") -> Explanation:
    """What a suspended Job waits for: its queue, since when, and Kueue's own words when known."""
    if not queue:
        return Explanation(Reason.QUEUED, f"its Job {job} is suspended since {since} until a queue admits it")
    why = f": {kueue_says}" if kueue_says else ""
    return Explanation(Reason.QUEUED, f"its Job {job} is queued in Kueue LocalQueue {queue} since {since}{why}")


# --- a Job's Failed condition, as Kubernetes words it ---------------------------------------------

BACKOFF_LIMIT_EXCEEDED = Explanation(Reason.BACKOFF_LIMIT_EXCEEDED, "Job has reached the specified backoff limit")


def pod_failure_policy(container: str, exit_code: int, rule: int = 0) -> Explanation:
    return Explanation(Reason.POD_FAILURE_POLICY, f"Container {container} for pod failed with exit code {exit_code} "
                                                  f"matching FailJob rule at index {rule}")
