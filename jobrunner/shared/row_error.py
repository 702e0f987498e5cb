"""Why one dataset row is skipped: a reason of jobrunner.shared.datasets.SKIP_REASONS and its detail."""

from __future__ import annotations


class RowError(ValueError):
    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
