"""Retry policy: after a pod of a Job exits, does the Job succeed, try again, or fail?

Kubernetes decides this for the operator's Jobs (`backoffLimit`, `podFailurePolicy` in
draftgen.plan); the local executor runs the same rule on its processes' exit codes, so a stage
that fails in a cluster fails the same way on a laptop:

- exit 0: the Job is Complete;
- an exit code of the FailJob rule (draftgen_contracts.exit_codes.FAIL_AT_ONCE): Failed at once,
  reason PodFailurePolicy (retrying a bad config cannot help); a full volume (WAIT_FOR_SPACE) likewise,
  by the second rule (the reconcile tries the stage again later: policies/space_policy);
- any other exit: one more failed pod; past `backoffLimit` of them the Job is Failed, reason
  BackoffLimitExceeded, else a new pod runs (it resumes from the stored output).
"""

from __future__ import annotations

from dataclasses import dataclass

from draftgen import reasons
from draftgen_contracts import exit_codes


@dataclass(frozen=True)
class AfterExit:
    outcome: str  # "succeeded", "restart" or "failed"
    reason: str = ""  # the Job's Failed condition's reason, as Kubernetes words it
    message: str = ""


def after_exit(container: str, exit_code: int, failed_pods_before: int, backoff_limit: int) -> AfterExit:
    if exit_code == exit_codes.OK:
        return AfterExit("succeeded")
    if exit_code in exit_codes.FAIL_AT_ONCE:
        return AfterExit("failed", *reasons.pod_failure_policy(container, exit_code))
    if exit_code in exit_codes.WAIT_FOR_SPACE:
        return AfterExit("failed", *reasons.pod_failure_policy(container, exit_code, rule=1))
    if failed_pods_before + 1 > backoff_limit:
        return AfterExit("failed", *reasons.BACKOFF_LIMIT_EXCEEDED)
    return AfterExit("restart")
