"""The preflight's findings (draftgen_contracts.preflight_report) as status."""

from __future__ import annotations

from draftgen_contracts.preflight_report import PreflightReport

from .api import Preflight, PreflightDataset, PreflightModel


def preflight_status(report: PreflightReport) -> Preflight:
    m = report.model
    return Preflight(
        model=PreflightModel(architecture=m.architecture, hidden_size=m.hidden_size, num_layers=m.num_layers,
                             vocab_size=m.vocab_size, context_length=m.context_length) if m else None,
        datasets=[PreflightDataset(name=d.name, rows=d.rows, usable_rows=d.usable_rows, prompt_tokens=d.prompt_tokens,
                                   skipped_by_reason=d.skipped_by_reason,
                                   expected_response_tokens=d.expected_response_tokens) for d in report.datasets],
        problem=report.problem.says() if report.problem else "", rows_per_second=report.rows_per_second)
