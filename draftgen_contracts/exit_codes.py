"""What each exit status of draftgen's processes means, and the retry rule's numbers.

A generation Job's `backoffLimit` and `podFailurePolicy` are built from these (draftgen.plan), and
`draftgen run` applies the same rule to its local processes (draftgen.policies.retry_policy).
"""

from __future__ import annotations

from .states import Component

OK = 0
FAILED = 1  # the run failed; a restart may help (counted against the backoff limit)
BAD_CONFIG = 2  # bad input (config, spec, a missing file): retrying cannot help, the Job fails at once
VOLUME_FULL = 74  # EX_IOERR: the output volume is full; what is written stays, a new pod resumes once there is room
RETRY_LATER = 75  # EX_TEMPFAIL: transient failures left rows to redo; run again to resume

# Exit codes that fail a Job at once (podFailurePolicy FailJob).
FAIL_AT_ONCE = frozenset({BAD_CONFIG})
# Exit codes that fail a Job at once (a second FailJob rule) without failing the run: the stage's Job
# is created again after a wait (docs/operator.md#a-full-volume), each pod finding the volume as full
# would otherwise load the model again for nothing.
WAIT_FOR_SPACE = frozenset({VOLUME_FULL})

# Pod failures a Job tolerates before it fails (its backoffLimit): generation survives six crashes or
# transient-failure exits; merge and extraction resume too, but a fault there is rarely transient.
BACKOFF_LIMITS = {Component.PREFLIGHT: 1, Component.GENERATE: 6, Component.MERGE: 3, Component.EXTRACT: 3}


def interrupted(signum: int) -> int:
    """The shell's exit status of a process stopped by a signal."""
    return 128 + signum
