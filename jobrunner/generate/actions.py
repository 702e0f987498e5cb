"""What the scheduler orders the engine to do (jobrunner.generate.scheduler), most of it what a
dataset's budget decided (jobrunner.generate.dataset_budget): the only way a decision reaches the
server, the records or the timers. An `Order` names the dataset an action is for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from draftgen_contracts.sglang_protocol import GenerateResult
from jobrunner.shared.prompts import Prompt


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
    """Call the dataset's `tick` after `after_s` seconds, instead of any tick planned before;
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


@dataclass(frozen=True)
class SendAgain:
    """These rows go to the server again, before the dataset's next fresh rows: their requests were
    trimmed, or cut before they made anything (the scheduler queues them; it never reaches the engine)."""

    prompts: tuple[Prompt, ...]


@dataclass(frozen=True)
class StartReading:
    """The dataset's turn has come: read and tokenize its rows, and offer them to the scheduler."""


@dataclass(frozen=True)
class Send:
    """Send `prompt` under `rid`, asking for at most `max_new_tokens`; it waited `queued_s` for its turn."""

    prompt: Prompt
    rid: str
    max_new_tokens: int
    queued_s: float


@dataclass(frozen=True)
class WaitForServer:
    """Requests keep failing after their retries: send nothing until the server is ready again."""

    reason: str


Action = (Cut | Abort | Stop | Tick | Keep | LeaveForNextRun | StopCuttingAtBudget | SendAgain | StartReading | Send
          | WaitForServer)


class Order(NamedTuple):
    dataset: str  # the dataset's name; "" for the whole process (WaitForServer)
    action: Action
