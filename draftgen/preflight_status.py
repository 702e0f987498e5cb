"""The preflight's findings (draftgen_contracts.preflight_report) as status."""

from __future__ import annotations

from draftgen_contracts.preflight_report import PreflightReport

from .api import Preflight, PreflightDataset, PreflightModel


def preflight_status(report: PreflightReport) -> Preflight:
    """The findings' fields that status has (the document holds more: budgets, reach)."""
    return Preflight(
        model=PreflightModel(**report.model.model_dump()) if report.model else None,
        datasets=[PreflightDataset(**d.model_dump(include=set(PreflightDataset.model_fields))) for d in report.datasets],
        problem=report.problem.says() if report.problem else "", rows_per_second=report.rows_per_second)
