"""Group policy: which failed generation Jobs are rank groups to start again?

A replica across nodes fails as one (draftgen.rank_group): any rank's failure fails its Job, since
half a group cannot serve. Unless a rank said the configuration is wrong (FAIL_AT_ONCE, which no
restart mends) or the volume is full (policies/space_policy), the Job is deleted so that it is created
again, the new group resuming from the replica's output, and the restart is counted in
status.replicas[].groupRestarts. A replica restarts as often as a single-node replica's pod is retried
(its Job's backoffLimit); past that its failure fails the run.
"""

from __future__ import annotations

from draftgen.observed import JobState, failed_exit_code
from draftgen_contracts import exit_codes
from draftgen_contracts.states import Component

RESTART_LIMIT = exit_codes.BACKOFF_LIMITS[Component.GENERATE]
NOT_RESTARTED = exit_codes.FAIL_AT_ONCE | exit_codes.WAIT_FOR_SPACE


def is_restartable(job: JobState, nodes: int) -> bool:
    """A failed rank group whose failure a new group may not meet (not a configuration error)."""
    return (nodes > 1 and job.component == Component.GENERATE and job.failed and not job.deleting
            and job.replica is not None and failed_exit_code(job) not in NOT_RESTARTED)


def groups_to_restart(jobs: list[JobState], nodes: int, restarts: dict[int, int],
                      limit: int = RESTART_LIMIT) -> list[JobState]:
    """The failed groups to start again now: those with restarts left (`restarts`: by replica, so far)."""
    return sorted((j for j in jobs if is_restartable(j, nodes) and restarts.get(j.replica, 0) < limit),
                  key=lambda j: j.name)
