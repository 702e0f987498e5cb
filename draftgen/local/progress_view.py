"""The generation progress on a terminal (a live table) or in a log (a block of plain lines)."""

from __future__ import annotations

import time

from draftgen.api import DatasetStatus, Estimate
from draftgen.fold import progress_text
from draftgen_contracts import budget
from draftgen_contracts.states import DatasetState

COLUMNS = ("dataset", "tokens", "budget", "%", "state", "tok/s", "ETA")
PLAIN_INTERVAL_S = 5.0  # one block of progress lines this often when stdout is not a terminal


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def progress_rows(datasets: list[DatasetStatus]) -> list[tuple[str, ...]]:
    """One row per dataset: tokens, budget, percent (past 100 when the budget was overshot), state,
    rate and ETA (the budget module's, while generating)."""
    rows = []
    for d in datasets:
        generating = d.state == DatasetState.GENERATING
        eta = budget.eta_seconds(d.budget_tokens, d.tokens or 0, d.tokens_per_second) if generating else None
        reported = d.tokens is not None  # "-" until a replica reports: a 0 might be a figure that falls
        rows.append((d.name, f"{d.tokens:,}" if reported else "-", f"{d.budget_tokens:,}",
                     f"{100 * d.tokens / d.budget_tokens:.1f}" if reported else "-",
                     str(d.state), f"{d.tokens_per_second:,.0f}" if generating else "-", format_duration(eta)))
    return rows


def title(datasets: list[DatasetStatus], estimate: Estimate | None = None) -> str:
    """The progress, and where the estimate says the run is headed (docs/preflight.md#the-estimate)."""
    said = [f"generate: {progress_text(datasets)} of the budgets"]
    if estimate is not None and estimate.generation_ends:
        said.append(f"ends about {estimate.generation_ends}")
    if estimate is not None and estimate.corpus_tokens:
        said.append(f"corpus about {estimate.corpus_tokens:,} tokens")
    if estimate is not None and estimate.hidden_state_size:
        said.append(f"hidden states about {estimate.hidden_state_size}")
    return "; ".join(said)


def plain_lines(datasets: list[DatasetStatus], estimate: Estimate | None = None) -> list[str]:
    rows = [COLUMNS, *progress_rows(datasets)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    return [title(datasets, estimate)] + [
        "  " + "  ".join(c.ljust(w) if i in (0, 4) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in rows]


class ProgressView:
    """A live table on a terminal, a block of plain lines every few seconds elsewhere (logs, CI)."""

    def __init__(self, stream, tty: bool):
        self.stream = stream
        self.tty = tty
        self.live = None
        self.last_plain = 0.0
        self.last_lines: list[str] = []

    def __enter__(self) -> ProgressView:
        if self.tty:
            from rich.console import Console
            from rich.live import Live

            # No refresh thread: the table is redrawn when new numbers come (about once a second).
            self.live = Live(console=Console(file=self.stream), auto_refresh=False)
            self.live.start()
        return self

    def show(self, datasets: list[DatasetStatus], estimate: Estimate | None = None, final: bool = False) -> None:
        if self.live is not None:
            self.live.update(self._table(datasets, estimate), refresh=True)
        elif final or time.monotonic() - self.last_plain >= PLAIN_INTERVAL_S:
            lines = plain_lines(datasets, estimate)
            if lines != self.last_lines:  # a log gets a block only when a number moved
                self.last_plain, self.last_lines = time.monotonic(), lines
                print("\n".join(lines), file=self.stream, flush=True)

    @staticmethod
    def _table(datasets: list[DatasetStatus], estimate: Estimate | None):
        from rich.table import Table

        table = Table(title=title(datasets, estimate), title_justify="left")
        for i, column in enumerate(COLUMNS):
            table.add_column(column, justify="left" if i in (0, 4) else "right")
        for row in progress_rows(datasets):
            table.add_row(*row)
        return table

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.stop()
