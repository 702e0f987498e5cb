"""One dataset's budget in this generate process, as a state machine (docs/budgets.md).

Events come in as method calls (the dataset starts, a request is sent, answered, kept, finished, the
other replicas report, a planned tick comes, the process stops), each with the `now` of the
engine's clock; the events that move the mode (start, sent, finished, peers, tick, stop, settle) are
each a match on the mode the budget is in. Out come the actions the scheduler routes
(jobrunner.generate.actions). Nothing here does I/O or reads a clock: the writer's live counts are
read, never written, and the decode clock is the one the engine feeds.
Which request goes next, among the datasets and the class slots, is the scheduler's
(jobrunner.generate.scheduler); the budget arithmetic is draftgen_contracts.budget and budget_shares;
this module decides when to ask it what.

    PENDING  not started yet (the datasets start in order)
    OPEN     sends when the scheduler offers a slot, unless the requests in flight are expected to
             bring what this replica may still add within the reach it is given (`is_covered`, a
             question of the moment: the partial lengths grow with time)
    CUTTING  its requests in flight were cut at the budget; nothing is sent until their answers are in
    SETTLED  this replica's share is made and nothing is in flight: the receiver makes the rest
    STOPPED  at the budget or the sample cap, stopped by the coordinator, or the process stops

PENDING -start-> OPEN (or SETTLED, as a restarted replica's predecessor left it); OPEN -cut-> CUTTING
-last cut answered-> OPEN; OPEN -settle-> SETTLED -the receiver's rows ran out elsewhere-> OPEN;
any -stop-> STOPPED.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from draftgen_contracts import budget, budget_shares
from draftgen_contracts.budget_shares import Outlook, Reach, Spend
from draftgen_contracts.progress import DatasetProgress, DurableCounts
from draftgen_contracts.sglang_protocol import GenerateResult
from draftgen_contracts.states import DatasetState
from jobrunner.shared.config import DatasetConfig, GenerateConfig
from jobrunner.generate.actions import (Abort, Action, Cut, Keep, LeaveForNextRun, SendAgain, Stop,
                                       StopCuttingAtBudget, Tick)
from jobrunner.generate.decode_clock import DecodeClock
from jobrunner.generate.end_tokens import ends_complete, request_end_ids
from jobrunner.generate.length_model import LengthModel
from jobrunner.shared.output import OutputTotals
from jobrunner.shared.prompts import Prompt
from jobrunner.shared.rate_meter import RateMeter

log = logging.getLogger("jobrunner.generate")


class BudgetMode(enum.Enum):
    PENDING = "pending"
    OPEN = "open"
    CUTTING = "cutting"
    SETTLED = "settled"
    STOPPED = "stopped"


def replica_sample_cap(sample_cap: int | None, replicas: int, replica: int) -> int | None:
    """This replica's share of a dataset's sample cap: the shares add up to the cap exactly."""
    if sample_cap is None:
        return None
    return sample_cap // replicas + (1 if replica < sample_cap % replicas else 0)


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


# Cut answers the server lost before a process stops cutting, if they are most of them: one lost now
# and then is SGLang aborting, for its own reasons, a request draftgen was cutting (docs/budgets.md).
LOST_CUTS_TO_STOP = 3


def loses_cut_outputs(lost: int, kept: int) -> bool:
    """Whether the server answers cut requests without their output as a rule, so that nothing can
    be kept of a cut: then the process aborts at the budget instead (cutting would go round, each
    cut's work lost, its rows sent again)."""
    return lost >= LOST_CUTS_TO_STOP and lost > kept


def peer_spend(progress: DatasetProgress, budget_tokens: int) -> Spend:
    """What another replica's report says for the budget sharing. `settled` and `Exhausted` were
    said of the budget the report names: under another budget they promise nothing."""
    same_budget = progress.budget_tokens == budget_tokens
    exhausted = same_budget and progress.state == DatasetState.EXHAUSTED
    return Spend(progress.completion_tokens, settled=exhausted or (same_budget and progress.settled),
                 exhausted=exhausted)


def still_settled(previous: DatasetProgress | None, budget_tokens: int) -> bool:
    """Settling is for good under one budget: a restarted replica keeps its predecessor's word, which
    the replica finishing the dataset may already have counted on."""
    return bool(previous and previous.settled and previous.budget_tokens == budget_tokens)


# How long an estimate of the requests in flight is reused while nothing else changes: their
# partial lengths grow by speed x this in the meantime.
ESTIMATE_TTL_S = 0.2


@dataclass(frozen=True)
class Estimate:
    finals: dict[int, float]  # by row, oldest request first: the length each is expected to end at
    outlook: Outlook  # what they bring in all, and one more request


@dataclass
class Request:
    """A request of the dataset in flight: sent, its Task not finished yet."""

    rid: str
    prompt: Prompt
    sent_at: float
    max_new_tokens: int  # what it was sent with (DatasetBudget.max_new_tokens)
    answered: bool = False  # its outcome is in (kept, skipped, failed): nothing left to cancel or cut
    estimated_at_cut: int | None = None  # what the decode clock said it had made when it was cut

    def stopped_at_the_budget(self, result: GenerateResult) -> bool:
        """Whether the server stopped it at the room it was sent with, short of its class's limit."""
        return (self.max_new_tokens < self.prompt.max_new_tokens and result.finish_reason == "length"
                and result.completion_tokens >= self.max_new_tokens)


class DatasetBudget:
    def __init__(self, config: DatasetConfig, totals: OutputTotals, clock: DecodeClock, *, sample_cap: int | None,
                 max_new_tokens: int, replicas: int = 1, replica: int = 0, first_receiver: int = 0,
                 cuts_at_budget: bool = False, settled: bool = False,
                 elsewhere: dict[int, DurableCounts] | None = None, end_ids: frozenset[int] = frozenset()):
        self.config = config
        self.totals = totals  # the writer's live counts (read only)
        self.clock = clock  # the server's, shared by every dataset of the process
        self.sample_cap = sample_cap
        self.replicas = replicas
        self.replica = replica
        self.first_receiver = first_receiver  # budget_shares.first_receiver of the dataset
        # The requests in flight at the budget are cut, not aborted (budget_shares.AT_BUDGET).
        self.cuts_at_budget = cuts_at_budget
        self.mode = BudgetMode.PENDING
        # A restarted replica's predecessor had settled under this budget: it starts SETTLED.
        self.settled_before = settled
        self.has_started = False  # it left PENDING by its start, not by a stop (a report then says Generating)
        self.end_ids = end_ids  # the ids a response of the dataset ends at (jobrunner.generate.end_tokens)
        self.elsewhere = elsewhere or {}  # the other parts on disk at the start
        self.requests: dict[int, Request] = {}  # in flight, by row
        self.cuts_unanswered: set[str] = set()  # rids cut at the budget whose calls have not ended
        self.peers: dict[int, Spend] = {}  # the other replicas' last reports
        self.stopped_externally = False
        self.cut_outputs_lost = 0  # answers to cuts without their output (an error instead)
        self.cut_outputs_kept = 0  # answers to cuts with it
        self.transient_failures = 0
        self.rate = RateMeter()
        self.lengths = LengthModel(max_new_tokens)
        self._version = 0  # bumped by whatever the estimate depends on
        self._estimate: Estimate | None = None
        self._estimate_key: tuple = ()

    @classmethod
    def for_dataset(cls, config: GenerateConfig, index: int, totals: OutputTotals, clock: DecodeClock,
                    previous: DatasetProgress | None, elsewhere: dict[int, DurableCounts],
                    model_end_ids: frozenset[int] = frozenset()) -> DatasetBudget:
        """The budget of the run's `index`-th dataset, resumed from the writer's totals and this
        replica's last report."""
        d = config.datasets[index]
        largest_max_new = max(c.max_new_tokens for c in config.prompt_classes)
        return cls(d, totals, clock, sample_cap=replica_sample_cap(d.sample_cap, config.replicas, config.replica),
                   max_new_tokens=d.max_new_tokens or largest_max_new, replicas=config.replicas,
                   replica=config.replica, first_receiver=budget_shares.first_receiver(index, config.replicas),
                   cuts_at_budget=config.at_budget == budget_shares.CUT,
                   settled=still_settled(previous, d.budget_tokens), elsewhere=elsewhere,
                   end_ids=request_end_ids(d.sampling_params, model_end_ids))

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def budget_tokens(self) -> int:
        return self.config.budget_tokens

    @property
    def own_tokens(self) -> int:
        return self.totals.completion_tokens

    @property
    def tokens(self) -> int:
        """Tokens counted against the budget: own written ones plus the other replicas' published ones."""
        return self.own_tokens + sum(p.tokens for p in self.peers.values())

    @property
    def settled(self) -> bool:
        """This replica sends no more for the dataset (budget_shares.settles), or will not once started."""
        return self.mode is BudgetMode.SETTLED or (self.mode is BudgetMode.PENDING and self.settled_before)

    @property
    def stopped(self) -> bool:
        return self.mode is BudgetMode.STOPPED

    def sends_no_more(self) -> bool:
        """Whether this replica's tokens of the dataset are final under this budget: settled, or its
        share of the sample cap made (a restart would stop at once too). A stop for another reason
        (the process ends) promises nothing: a new process resumes."""
        return self.settled or budget.is_sample_cap_reached(self.sample_cap, self.totals.records)

    def in_flight(self) -> int:
        return len(self.requests)

    # ---- events -------------------------------------------------------------------------------

    def start(self, now: float) -> list[Action]:
        """The dataset's turn: a share smaller than one response settles before sending anything. A
        dataset done since the scheduler looked (the peers' reports came in meanwhile) stops."""
        match self.mode:
            case BudgetMode.PENDING:
                self.has_started = True
                self.mode = BudgetMode.SETTLED if self.settled_before else BudgetMode.OPEN
                actions = self._rebalance(now)
                return actions + self.stop() if self.is_done() else actions
            case _:
                return []

    def sent(self, prompt: Prompt, rid: str, now: float, max_new_tokens: int | None = None) -> list[Action]:
        match self.mode:
            case BudgetMode.OPEN:
                self.requests[prompt.row] = Request(rid, prompt, now, max_new_tokens or prompt.max_new_tokens)
                self._changed()
                return self._plan_cut(now)
            case mode:
                raise RuntimeError(f"{self.name}: a request sent while {mode.value}")

    def answered(self, prompt: Prompt, rid: str, result: GenerateResult, e2e_s: float, now: float) -> list[Action]:
        """The server answered a request (or a trace was read): what to keep of it."""
        request = self._answer(prompt.row, rid)
        if prompt.response_ids is not None:
            return [Keep(result)]  # never cut: a trace costs no GPU time, and the rest of it is worth keeping
        aborted = result.finish_reason == "abort"
        if (aborted and request is not None and rid in self.cuts_unanswered) or (
                self.cuts_at_budget and not aborted and result.completion_tokens > self.remaining(now)) or (
                request is not None and request.stopped_at_the_budget(result)):
            # Cut at the budget, stopped by the server at the room it was sent with, or ended on
            # its own past what this replica may add (it came back before the cut reached it):
            # kept up to the budget.
            return self._keep_cut(prompt, result, e2e_s, now, request.estimated_at_cut if request else None)
        if aborted:
            # Aborted by the server on its own (our own aborts come with a cancelled Task, whose
            # answer is never read): not a response; the next run generates the row again.
            return [] if self.stopped else self.failed(prompt.row, rid, "aborted by the server")
        return [Keep(result)]

    def kept(self, result: GenerateResult, generated: int | None, e2e_s: float, now: float) -> list[Action]:
        """The record of a `Keep` is written: its length (censored where it was cut; what the server
        made for it is exact) and what it says of the decode clock. At the budget, the dataset stops."""
        self.rate.add(now, budget.kept_tokens(result.finish_reason, result.completion_tokens))
        if generated is None:
            self.lengths.add(result.completion_tokens)
        else:
            self.lengths.add_cut(generated)
        self.clock.observe(now - e2e_s, now, result.completion_tokens if generated is None else generated)
        self._changed()
        return self.stop() if self.is_done() else []

    def skipped(self, row: int, rid: str) -> None:
        """The server refused the request for good (its row is recorded as skipped)."""
        self._answer(row, rid)

    def failed(self, row: int, rid: str, reason: str) -> list[Action]:
        self._answer(row, rid)
        self.transient_failures += 1
        return [LeaveForNextRun(row, reason)]

    def finished(self, row: int, rid: str, now: float) -> list[Action]:
        """The request's Task ended (answered, or cancelled by an `Abort` or a `Stop`); the last of a
        cut's ends the cut (`_judge_the_cut`)."""
        request = self.requests.get(row)
        if request is not None and request.rid == rid:
            del self.requests[row]
        self.cuts_unanswered.discard(rid)
        self._changed()
        match self.mode:
            case BudgetMode.CUTTING if not self.cuts_unanswered:
                self.mode = BudgetMode.OPEN
                return self._judge_the_cut() + self._rebalance(now)
            case _:
                return self._rebalance(now)

    def peers_reported(self, reports: dict[int, DatasetProgress], stopped: bool, now: float) -> list[Action]:
        """The coordinator's view, read once per refresh: the other replicas' last reports on this
        dataset and whether it was declared done elsewhere. A dataset not started yet stops on its start."""
        self.peers = {r: peer_spend(p, self.budget_tokens) for r, p in reports.items()}
        self.stopped_externally = stopped
        self._changed()
        match self.mode:
            case BudgetMode.PENDING:
                return []
            case _ if self.is_done():
                return self.stop()
            case _:
                return self._rebalance(now)

    def tick(self, now: float) -> list[Action]:
        """A planned tick: the requests in flight should have made what remains by now."""
        self._changed()  # the estimate's partial lengths have grown
        match self.mode:
            case BudgetMode.OPEN:
                return self._plan_cut(now)
            case _:
                return [Tick(None)]

    def stop(self) -> list[Action]:
        """No more dispatch for the dataset, every request of it aborted; for good."""
        match self.mode:
            case BudgetMode.STOPPED:
                return []
            case _:
                self.mode = BudgetMode.STOPPED
                return [Stop(tuple(r.rid for r in self.requests.values()))]

    def stop_cutting_at_budget(self) -> None:
        """The server loses the output of aborted requests (StopCuttingAtBudget): abort at the budget."""
        self.cuts_at_budget = False
        self._changed()

    # ---- the budget over all replicas -----------------------------------------------------------

    def is_done(self) -> bool:
        return budget.is_dataset_done(self.budget_tokens, self.tokens, self.sample_cap, self.totals.records,
                                      self.stopped_externally)

    def wants_more(self) -> bool:
        return not self.stopped and not self.is_done()

    def is_receiver(self) -> bool:
        exhausted = {r for r, s in self.peers.items() if s.exhausted}
        return budget_shares.receiver(self.replicas, exhausted, self.first_receiver) == self.replica

    def others_settled(self) -> bool:
        return all(r in self.peers and self.peers[r].settled for r in range(self.replicas) if r != self.replica)

    def remaining(self, now: float) -> int:
        """What this replica may still bring to the dataset (budget_shares.allowance)."""
        return budget_shares.allowance(self.budget_tokens, self.replicas, self.replica, self.own_tokens,
                                       self.peers, self.estimate(now).outlook.response, self.first_receiver,
                                       self.cuts_at_budget)

    def estimate(self, now: float) -> Estimate:
        """The length model applied to the requests in flight; recomputed when something changed
        or the partial lengths have grown for `ESTIMATE_TTL_S`."""
        key = (self._version, int(now / ESTIMATE_TTL_S))
        if self._estimate is None or self._estimate_key != key:
            oldest_first = sorted(self.requests.values(), key=lambda r: r.sent_at)
            partials = [min(r.prompt.max_new_tokens, self.clock.generated(r.sent_at, now)) for r in oldest_first]
            moments = self.lengths.moments(partials)
            finals = [moments.final(p) for p in partials]
            outlook = Outlook(coverage=sum(m for m, _ in finals), variance=sum(v for _, v in finals),
                              response=moments.mean[0], response_variance=moments.variance[0],
                              partial=sum(partials), in_flight=len(partials))
            self._estimate = Estimate({r.prompt.row: m for r, (m, _) in zip(oldest_first, finals)}, outlook)
            self._estimate_key = key
        return self._estimate

    # ---- what the scheduler asks ----------------------------------------------------------------

    def max_new_tokens(self, prompt: Prompt, now: float) -> int:
        """What a request about to be sent may make: its class's limit and, cutting at the budget,
        no more than the room nothing in flight has made yet of this replica's part. A request
        that made that alone would have been cut there, so the server itself stops it however
        late this process acts on the cut (a loaded node, a pause)."""
        if not self.cuts_at_budget or prompt.response_ids is not None:
            return prompt.max_new_tokens
        return max(1, min(prompt.max_new_tokens, self.room(now)))

    def may_send(self, now: float, reach: Reach) -> bool:
        """Whether a prompt of the dataset may go now within `reach`, its class slot granted."""
        if self.config.concurrency is not None and len(self.requests) >= self.config.concurrency:
            return False
        match self.mode:
            case BudgetMode.OPEN:
                return budget.should_dispatch(self.budget_tokens, self.tokens, self.sample_cap, self.totals.records,
                                              len(self.requests), self.stopped_externally) and not self.is_covered(
                    now, reach)
            case _:
                return False

    def is_covered(self, now: float, reach: Reach) -> bool:
        """Whether this replica should send no more for the dataset for now: settled, or the
        requests in flight are expected to bring all it may still add within `reach` (how far the
        other datasets leave it: the scheduler's `reach`). The next dataset may then start."""
        if self.settled:
            return True
        exact = budget_shares.aims_exactly(self.is_receiver(), self.others_settled())
        return not budget_shares.wants_another(exact, self.remaining(now), self.estimate(now).outlook,
                                               cut=self.cuts_at_budget, reach=reach)

    def may_still_send(self) -> bool:
        """Whether the dataset may send again in this process (not stopped, settled or done)."""
        return not (self.stopped or self.settled or self.is_done())

    def room(self, now: float) -> int:
        """What this replica may still add that no request in flight has made yet (budget_shares.room)."""
        return budget_shares.room(self.remaining(now), self.estimate(now).outlook)

    def must_cut(self, now: float) -> bool:
        """Cutting at the budget: whether the requests in flight have made what this replica may
        add (budget_shares.cuts_now)."""
        return (self.mode is BudgetMode.OPEN and self.cuts_at_budget
                and budget_shares.cuts_now(self.remaining(now), self.estimate(now).outlook))

    def seconds_until_cut(self, now: float) -> float | None:
        if self.mode is not BudgetMode.OPEN or not self.cuts_at_budget:
            return None
        return budget_shares.seconds_to_cut(self.remaining(now), self.estimate(now).outlook, self.clock.rate())

    def rows_to_trim(self, now: float) -> list[int]:
        """Requests to abort now because the others in flight are expected to bring what remains
        without them: the youngest first (the least work lost, the most still to pay for). Only
        where an overshoot is excess: at the receiver once every other replica has settled. A
        replica's overshoot of its share, or the receiver's of its reserve, is absorbed by what
        the receiver makes last, and trimming there was measured to throw away more than it saves
        (docs/budgets.md). An answered request has its record already: it is never sent again."""
        if (self.cuts_at_budget or not self.requests or self.stopped
                or not (self.is_receiver() and self.others_settled())):
            return []
        return [row for row in surplus(self.estimate(now).finals, self.remaining(now))
                if not self.requests[row].answered]

    def settles(self, now: float) -> bool:
        return not self.settled and budget_shares.settles(
            self.is_receiver(), self.remaining(now), len(self.requests), self.estimate(now).outlook,
            self.cuts_at_budget)

    # ---- reports ------------------------------------------------------------------------------

    def state(self, rows_used: bool = False) -> str:
        """The dataset's state for the reports; `rows_used`: every row was read and sent (the scheduler's)."""
        exhausted = rows_used and not self.requests and self.transient_failures == 0
        return budget.dataset_state(self.budget_tokens, self.tokens, self.sample_cap, self.totals.records,
                                    started=self.has_started, exhausted=exhausted,
                                    stopped=self.stopped_externally)

    def progress(self, durable: OutputTotals, now: float, rows_used: bool = False) -> DatasetProgress:
        """Published totals: the durable ones only (`durable`, the writer's last sync)."""
        rate = self.rate.rate(now)
        return DatasetProgress(
            **durable.counts().model_dump(), state=self.state(rows_used),
            skipped_by_reason=dict(durable.skipped_by_reason), budget_tokens=self.budget_tokens,
            tokens_per_second=round(rate, 1), eta_s=budget.eta_seconds(self.budget_tokens, self.tokens, rate),
            in_flight=len(self.requests), settled=self.sends_no_more() and not self.requests, elsewhere=self.elsewhere)

    # ---- transitions --------------------------------------------------------------------------

    def _changed(self) -> None:
        self._version += 1

    def _answer(self, row: int, rid: str) -> Request | None:
        request = self.requests.get(row)
        if request is None or request.rid != rid:
            return None
        request.answered = True
        return request

    def _keep_cut(self, prompt: Prompt, result: GenerateResult, e2e_s: float, now: float,
                  estimated: int | None) -> list[Action]:
        """A request cut at the budget: its partial response kept, cut to what this replica may
        still add (the tokens past it are the excess). A request that had made nothing, or whose
        output the server lost (it aborted the request itself with an error as the cut reached it,
        docs/budgets.md), is sent again if the dataset still wants more."""
        if result.output_lost:
            self.cut_outputs_lost += 1
        else:
            self.cut_outputs_kept += 1
        room = self.remaining(now)
        output_ids = result.output_ids[:room]
        if ends_complete(output_ids, self.end_ids):
            # The abort landed on the step that made an end token, which skips the end checks: the
            # response is complete, and as long as its server would have made it.
            return [Keep(GenerateResult(output_ids, "stop", result.prompt_tokens, len(output_ids), result.rid,
                                        result.attempts))]
        if output_ids:
            cut = GenerateResult(output_ids, "length", result.prompt_tokens, len(output_ids), result.rid,
                                 result.attempts)
            return [Keep(cut, generated=result.completion_tokens, estimated=estimated)]
        if not result.output_lost:
            # What it made, maybe nothing, still corrects the clock: one that ran ahead would
            # otherwise cut again and again on answers that keep nothing.
            self.clock.observe(now - e2e_s, now, result.completion_tokens)
            self._changed()
        return [SendAgain((prompt,))] if room > 0 else []

    def _judge_the_cut(self) -> list[Action]:
        """Every answer of a cut is in: whether the server loses cut outputs as a rule, judged on
        whole cuts (a cut's lost answers may come back before its others). The scheduler turns
        cutting off for the other datasets of the process too."""
        if self.cuts_at_budget and loses_cut_outputs(self.cut_outputs_lost, self.cut_outputs_kept):
            self.stop_cutting_at_budget()
            return [StopCuttingAtBudget()]
        return []

    def _rebalance(self, now: float) -> list[Action]:
        """After anything that moves the estimate or the shares: abort the requests the others in
        flight make unnecessary (their rows are sent again if the rest fall short), settle when this
        replica's share is made or open again as the receiver (budget_shares), and plan the cut."""
        if self.mode in (BudgetMode.PENDING, BudgetMode.STOPPED):
            return []
        actions = self._trim(now)
        match self.mode:
            case BudgetMode.SETTLED if self.is_receiver():
                # Every replica before it ran out of rows: it finishes the dataset for them.
                self.mode = BudgetMode.OPEN
                log.info("%s: finishing the dataset for the replicas out of rows", self.name)
            case BudgetMode.OPEN | BudgetMode.CUTTING if self.settles(now):
                self.mode = BudgetMode.SETTLED
                log.info("%s: share made (%d tokens); the receiver makes the rest", self.name, self.own_tokens)
        return actions + self._plan_cut(now)

    def _trim(self, now: float) -> list[Action]:
        rows = self.rows_to_trim(now)
        if not rows:
            return []
        trimmed = [self.requests.pop(row) for row in rows]
        self._changed()
        log.info("%s: %d requests in flight no longer needed, aborted", self.name, len(trimmed))
        return [Abort(tuple(r.rid for r in trimmed)), SendAgain(tuple(r.prompt for r in trimmed))]

    def _plan_cut(self, now: float) -> list[Action]:
        """Cut now if the requests in flight have made what remains, else look again when they
        should have."""
        if self.must_cut(now):
            return [Tick(None), *self._cut(now)]
        return [Tick(self.seconds_until_cut(now))]

    def _cut(self, now: float) -> list[Action]:
        """Every request in flight not answered is cut; nothing is sent until their answers are in."""
        cut = [r for r in self.requests.values() if not r.answered and r.rid not in self.cuts_unanswered]
        if not cut:
            return []
        for r in cut:
            r.estimated_at_cut = round(min(r.max_new_tokens, self.clock.generated(r.sent_at, now)))
        rids = tuple(r.rid for r in cut)
        self.cuts_unanswered.update(rids)
        self.mode = BudgetMode.CUTTING
        log.info("%s: cutting %d requests in flight at %d tokens (about %d made by them, %d to add)",
                 self.name, len(rids), self.own_tokens, self.estimate(now).outlook.partial, self.remaining(now))
        return [Cut(rids)]
