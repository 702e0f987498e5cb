"""API error policy: when the API server refuses one of the operator's writes (creating a child,
deleting a Job), is that the end of the run or something to wait out, and what does the object say?

- Permanent: the request itself is wrong and sending it again cannot help: 400 and 422 (an
  invalid child, e.g. a label value the spec let through) and an admission webhook's denial. The
  DatasetGeneration fails with the API server's own message.
- Transient: the world may change: 403 (a permission or a ResourceQuota that may come back),
  409 (a conflict; a create that finds its object there is not an error), 429, 5xx, no answer
  (a webhook that cannot be reached: 500). The phase stays; condition
  `Blocked` says what is refused and when it is tried again, with exponential backoff.
"""

from __future__ import annotations

from dataclasses import dataclass

from draftgen.reasons import Reason

BACKOFF_FIRST_S = 2.0
BACKOFF_MAX_S = 60.0


@dataclass(frozen=True)
class ApiError:
    """One write the API server refused."""

    verb: str  # "create", "delete"
    kind: str
    name: str
    status: int  # HTTP status; 0 when no answer came
    message: str  # the API server's own message (its Status object's), or the client's error

    def says(self) -> str:
        answer = f"HTTP {self.status}" if self.status else "no answer"
        return f"{self.verb} {self.kind} {self.name}: {answer}: {self.message}"


def is_permanent(error: ApiError) -> bool:
    if error.status in (400, 422):
        return True
    return error.status == 403 and "admission webhook" in error.message and "denied" in error.message


def reason_of(error: ApiError) -> Reason:
    """The condition reason for a refused write."""
    if is_permanent(error):
        return Reason.ADMISSION_DENIED if error.status == 403 else Reason.CHILD_INVALID
    if error.status == 403:
        return Reason.QUOTA_EXCEEDED if "exceeded quota" in error.message else Reason.FORBIDDEN
    return {409: Reason.CONFLICT, 429: Reason.THROTTLED}.get(error.status, Reason.API_UNAVAILABLE)


def backoff_s(failures: int) -> float:
    """Seconds before the next try after `failures` refusals in a row (2, 4, 8, ... up to 60)."""
    return min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** max(0, failures - 1))
