"""One dataset's live state in this generate process, and the budget questions it answers
(docs/budgets.md)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from draftgen_contracts import budget, budget_shares
from draftgen_contracts.budget_shares import Outlook, Spend
from draftgen_contracts.progress import DatasetProgress, DurableCounts
from draftgen_contracts.states import DatasetState
from jobrunner.config import DatasetConfig
from jobrunner.generate.decode_clock import DecodeClock
from jobrunner.generate.length_model import LengthModel
from jobrunner.output import PartWriter
from jobrunner.prompts import Prompt
from jobrunner.stats import RateMeter


def replica_sample_cap(sample_cap: int | None, replicas: int, replica: int) -> int | None:
    """This replica's share of a dataset's sample cap: the shares add up to the cap exactly."""
    if sample_cap is None:
        return None
    return sample_cap // replicas + (1 if replica < sample_cap % replicas else 0)


def sampling_params_for(dataset: DatasetConfig, prompt: Prompt) -> dict:
    return {**dataset.sampling_params, "max_new_tokens": prompt.max_new_tokens}


def surplus(finals: dict[int, float], need: float) -> list[int]:
    """The requests (rows, by expected final length, oldest first) that the older ones make
    unnecessary: newest first, as long as the rest are still expected to bring `need`."""
    covered, trimmed = sum(finals.values()), []
    for row, final in reversed(finals.items()):
        if covered - final < need:
            break
        covered -= final
        trimmed.append(row)
    return trimmed


def peer_spend(progress: DatasetProgress, budget_tokens: int) -> Spend:
    """What another replica's report says for the budget sharing. `settled` and `Exhausted` were
    said of the budget the report names: under another budget they promise nothing."""
    same_budget = progress.budget_tokens == budget_tokens
    exhausted = same_budget and progress.state == DatasetState.EXHAUSTED
    return Spend(progress.completion_tokens, settled=exhausted or (same_budget and progress.settled),
                 exhausted=exhausted)


# How long an estimate of the requests in flight is reused while nothing else changes: their
# partial lengths grow by speed x this in the meantime.
ESTIMATE_TTL_S = 0.2


@dataclass(frozen=True)
class Estimate:
    finals: dict[int, float]  # by row, oldest request first: the length each is expected to end at
    outlook: Outlook  # what they bring in all, and one more request


@dataclass
class InFlight:
    task: asyncio.Task
    rid: str
    prompt: Prompt
    dispatched_at: float  # time.monotonic()
    cut: bool = False  # aborted at the budget, its partial response to be kept


@dataclass
class DatasetRun:
    """The live state of one dataset in this process."""

    config: DatasetConfig
    writer: PartWriter
    sample_cap: int | None
    max_new_tokens: int  # the largest any of its requests may ask for: where the length model ends
    replicas: int = 1
    replica: int = 0
    first_receiver: int = 0  # budget_shares.first_receiver of the dataset
    cut: bool = False  # the requests in flight at the budget are cut, not aborted (budget_shares.AT_BUDGET)
    later: list[DatasetRun] = field(default_factory=list)  # this process's datasets after this one
    clock: DecodeClock = field(default_factory=lambda: DecodeClock(time.monotonic(), 0.05))  # the server's, shared
    in_flight: dict[int, InFlight] = field(default_factory=dict)  # by row
    peers: dict[int, Spend] = field(default_factory=dict)  # the other replicas' last reports (set_peers)
    stopped_externally: bool = False
    started: bool = False
    rows_exhausted: bool = False
    stopping: bool = False  # dispatch stopped and in-flight aborted
    settled: bool = False  # this replica sends no more for the dataset (budget_shares.settles)
    requeued: deque[Prompt] = field(default_factory=deque)  # rows whose requests were trimmed, to send again
    sends: dict[int, int] = field(default_factory=dict)  # row -> times sent, for a fresh rid on each
    waiting_for_class: str | None = None  # the class the feed's next prompt waits for
    classes_sent: set[str] = field(default_factory=set)  # the prompt classes of its requests so far
    transient_failures: int = 0
    elsewhere: dict[int, DurableCounts] = field(default_factory=dict)  # the other parts on disk at the start
    rate: RateMeter = field(default_factory=RateMeter)
    lengths: LengthModel = field(init=False)
    cutting: int = 0  # requests cut and not answered yet
    cut_timer: asyncio.TimerHandle | None = None  # when the requests in flight should have made what remains
    version: int = 0
    _estimate: Estimate | None = None
    _estimate_key: tuple = ()

    def __post_init__(self) -> None:
        self.lengths = LengthModel(self.max_new_tokens)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def budget_tokens(self) -> int:
        return self.config.budget_tokens

    @property
    def own_tokens(self) -> int:
        return self.writer.totals.completion_tokens

    @property
    def tokens(self) -> int:
        """Tokens counted against the budget: own written ones plus the other replicas' published ones."""
        return self.own_tokens + sum(p.tokens for p in self.peers.values())

    # ---- the budget over all replicas -------------------------------------------------------

    def is_done(self) -> bool:
        return budget.is_dataset_done(self.budget_tokens, self.tokens, self.sample_cap,
                                      self.writer.totals.records, self.stopped_externally)

    def set_peers(self, reports: dict[int, DatasetProgress]) -> None:
        """The other replicas' last reports on this dataset, read once per coordination refresh."""
        self.peers = {r: peer_spend(p, self.budget_tokens) for r, p in reports.items()}
        self.changed()

    def is_receiver(self) -> bool:
        exhausted = {r for r, s in self.peers.items() if s.exhausted}
        return budget_shares.receiver(self.replicas, exhausted, self.first_receiver) == self.replica

    def others_settled(self) -> bool:
        return all(r in self.peers and self.peers[r].settled for r in range(self.replicas) if r != self.replica)

    # ---- what is in flight ------------------------------------------------------------------

    def changed(self) -> None:
        """Something the estimate depends on changed (a dispatch, a completion, the peers' reports)."""
        self.version += 1

    def estimate(self, now: float) -> Estimate:
        """The length model applied to the requests in flight; recomputed when something changed
        or the partial lengths have grown for `ESTIMATE_TTL_S`."""
        key = (self.version, int(now / ESTIMATE_TTL_S))
        if self._estimate is None or self._estimate_key != key:
            oldest_first = sorted(self.in_flight.values(), key=lambda f: f.dispatched_at)
            partials = [min(f.prompt.max_new_tokens, self.clock.generated(f.dispatched_at, now)) for f in oldest_first]
            moments = self.lengths.moments(partials)
            finals = [moments.final(p) for p in partials]
            outlook = Outlook(coverage=sum(m for m, _ in finals), variance=sum(v for _, v in finals),
                              response=moments.mean[0], response_variance=moments.variance[0],
                              partial=sum(partials), in_flight=len(partials))
            self._estimate = Estimate({f.prompt.row: m for f, (m, _) in zip(oldest_first, finals)}, outlook)
            self._estimate_key = key
        return self._estimate

    def remaining(self, now: float) -> int:
        """What this replica may still bring to the dataset (budget_shares.allowance)."""
        return budget_shares.allowance(self.budget_tokens, self.replicas, self.replica, self.own_tokens,
                                       self.peers, self.estimate(now).outlook.response, self.first_receiver,
                                       self.cut)

    def may_take_slots(self) -> bool:
        """Whether the dataset would send a request now if a slot were free: a slot held back by
        the datasets before it can go to it (one that is itself holding back takes nothing)."""
        return not (self.stopping or self.settled or self.rows_exhausted or self.is_done()
                    or self.is_covered(filling=False))

    def fills(self) -> bool:
        """Whether a free slot left by this dataset would stay empty: no dataset after it in this
        process may take a slot of the classes its prompts are in (one that has sent nothing yet
        may take any). Cutting at the budget, the dataset then fills its slots to the end."""
        return not any(r.may_take_slots() and (not r.classes_sent or r.classes_sent & self.classes_sent)
                       for r in self.later)

    # ---- decisions ----------------------------------------------------------------------------

    def should_dispatch(self) -> bool:
        return not self.stopping and not self.cutting and budget.should_dispatch(
            self.budget_tokens, self.tokens, self.sample_cap, self.writer.totals.records,
            len(self.in_flight), self.stopped_externally) and not self.is_covered()

    def is_covered(self, filling: bool = True) -> bool:
        """Whether this replica should send no more for the dataset for now: settled, or the
        requests in flight are expected to bring all it may still add (one more would most likely
        overshoot, or be aborted at the crossing). The next dataset may then start."""
        if self.settled:
            return True
        now = time.monotonic()
        exact = budget_shares.aims_exactly(self.is_receiver(), self.others_settled())
        return not budget_shares.wants_another(exact, self.remaining(now), self.estimate(now).outlook,
                                               cut=self.cut, fill=filling and self.cut and self.fills())

    def should_cut(self, now: float) -> bool:
        """Cutting at the budget: whether the requests in flight have made what this replica may
        add (budget_shares.cuts_now)."""
        return (self.cut and not self.cutting and not self.stopping
                and budget_shares.cuts_now(self.remaining(now), self.estimate(now).outlook))

    def seconds_to_cut(self, now: float) -> float | None:
        if not self.cut or self.cutting or self.stopping:
            return None
        return budget_shares.seconds_to_cut(self.remaining(now), self.estimate(now).outlook, self.clock.rate())

    def rows_to_trim(self) -> list[int]:
        """Requests to abort now because the others in flight are expected to bring what remains
        without them: the youngest first (the least work lost, the most still to pay for). Only
        where an overshoot is excess: at the receiver once every other replica has settled. A
        replica's overshoot of its share, or the receiver's of its reserve, is absorbed by what
        the receiver makes last, and trimming there was measured to throw away more than it saves
        (docs/budgets.md)."""
        if self.cut or not self.in_flight or self.stopping or not (self.is_receiver() and self.others_settled()):
            return []
        now = time.monotonic()
        return surplus(self.estimate(now).finals, self.remaining(now))

    def should_settle(self) -> bool:
        now = time.monotonic()
        return not self.settled and budget_shares.settles(
            self.is_receiver(), self.remaining(now), len(self.in_flight), self.estimate(now).outlook, self.cut)

    def record_response(self, tokens: int, sent: float, answered: float, cut: bool = False) -> None:
        """A response from the server written: its length (censored when cut), and what it says of
        the server's decode clock."""
        (self.lengths.add_cut if cut else self.lengths.add)(tokens)
        self.clock.observe(sent, answered, tokens)
        self.changed()

    # ---- reports ------------------------------------------------------------------------------

    def state(self) -> str:
        exhausted = (self.rows_exhausted and not self.in_flight and not self.requeued
                     and self.transient_failures == 0)
        return budget.dataset_state(self.budget_tokens, self.tokens, self.sample_cap,
                                    self.writer.totals.records, started=self.started, exhausted=exhausted,
                                    stopped=self.stopped_externally)

    def progress(self, now: float) -> DatasetProgress:
        """Published totals: the durable ones only (the writer's last sync)."""
        durable = self.writer.durable
        rate = self.rate.rate(now)
        return DatasetProgress(
            **durable.counts().model_dump(), state=self.state(), skipped_by_reason=dict(durable.skipped_by_reason),
            budget_tokens=self.budget_tokens, tokens_per_second=round(rate, 1), eta_s=budget.eta_seconds(self.budget_tokens, self.tokens, rate),
            in_flight=len(self.in_flight), settled=self.settled and not self.in_flight, elsewhere=self.elsewhere)
