"""The preflight's findings (draftgen_contracts.preflight_report) as status."""

from __future__ import annotations

from draftgen_contracts.preflight_report import PreflightReport

from .api import Preflight


def preflight_status(report: PreflightReport) -> Preflight:
    """The findings' model and datasets as they are, and the problem as one line."""
    return Preflight(model=report.model, datasets=report.datasets,
                     problem=report.problem.says() if report.problem else "", rows_per_second=report.rows_per_second)
