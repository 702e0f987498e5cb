"""A finding that makes the run impossible, naming where: the file, and the row and field when a row
is to blame."""

from __future__ import annotations

from draftgen_contracts.preflight_report import Problem


class PreflightProblem(Exception):
    """Raised where the check finds it; it carries the findings' own Problem, which the run writes."""

    def __init__(self, where: str, message: str):
        self.problem = Problem(where=where, message=message)
        super().__init__(self.problem.says())
