"""The preflight's findings (draftgen_contracts.preflight_report) as status, and the warning a budget
out of reach of its rows gives."""

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
                                   expected_response_tokens=d.expected_response_tokens,
                                   budget_reachable=d.budget_reachable) for d in report.datasets],
        problem=report.problem.says() if report.problem else "", rows_per_second=report.rows_per_second)


def budgets_out_of_reach(report: PreflightReport) -> str | None:
    """What to warn of when a dataset's usable rows look too few for its budget; None when all reach."""
    short = [d for d in report.datasets if not d.budget_reachable]
    if not short:
        return None
    return "; ".join(f"{d.name}: {d.usable_rows:,} usable rows may give about {d.expected_response_tokens:,} tokens "
                     f"of its {d.budget_tokens:,}: it will be Exhausted at about {d.expected_response_tokens:,} tokens"
                     for d in short)
