"""What a dataset's controller asks the engine to do (jobrunner.generate.dataset_controller): the
only way a budget decision reaches the server, the records or the timers."""

from __future__ import annotations

from dataclasses import dataclass

from draftgen_contracts.sglang_protocol import GenerateResult


@dataclass(frozen=True)
class Cut:
    """Abort these requests at the server and keep what their calls answer with: the budget is made."""

    rids: tuple[str, ...]


@dataclass(frozen=True)
class Abort:
    """Cancel these requests and abort them at the server: the others in flight make them
    unnecessary (their rows are sent again if those fall short)."""

    rids: tuple[str, ...]


@dataclass(frozen=True)
class Stop:
    """The dataset is done for this process: cancel every request of it still running (`rids`, all
    of it in flight; those already answered have nothing left to cancel) and abort them at the server."""

    rids: tuple[str, ...]


@dataclass(frozen=True)
class Tick:
    """Call the controller's `tick` after `after_s` seconds, instead of any tick planned before;
    None: no tick is due. The partial lengths grow with time, not only with events."""

    after_s: float | None


@dataclass(frozen=True)
class Keep:
    """Write the record of `result`; `generated` is what the server made for a response cut at
    the budget (None: the response is kept whole), `estimated` what the decode clock said it had
    made when the cut was decided (None: the server stopped it, or it ended, before any cut)."""

    result: GenerateResult
    generated: int | None = None
    estimated: int | None = None


@dataclass(frozen=True)
class LeaveForNextRun:
    """A request failed: its row is not recorded, the next run generates it again."""

    row: int
    reason: str


@dataclass(frozen=True)
class StopCuttingAtBudget:
    """The server answers aborted requests without their output: nothing can be kept of a cut, so
    every dataset of the process aborts at the budget from now on."""


Action = Cut | Abort | Stop | Tick | Keep | LeaveForNextRun | StopCuttingAtBudget
