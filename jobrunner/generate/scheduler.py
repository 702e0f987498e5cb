"""What goes to the server next: the one scheduler of a generate process (docs/budgets.md).

The datasets of a process share one server, so what they share is decided here, once: the class
slots in flight, the order the datasets start in and when the next may start, how far each may
fill the slots (its reach), which prompt is sent now and with what room, the decode clock's
housekeeping, what the other datasets do when one finds that the server loses cut outputs, the rule
that gives up on a server that keeps failing, and the exit status. What one dataset may still add
is its budget's (jobrunner.generate.dataset_budget): the scheduler asks it, and routes what it
answers. Events come in as method calls with the engine's `now`; out come `Order`s the engine
carries out (jobrunner.generate.actions). No I/O, no clock, as nano-vllm's scheduler beside its
engine.
"""

from __future__ import annotations

import logging
import signal
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from draftgen_contracts import exit_codes, names
from draftgen_contracts.budget_shares import Reach
from draftgen_contracts.progress import DatasetProgress
from draftgen_contracts.prompt_classes import PromptClass
from draftgen_contracts.sglang_protocol import GenerateResult
from draftgen_contracts.states import DATASET_DONE, DatasetState
from jobrunner.generate import class_slots
from jobrunner.generate.actions import (Action, LeaveForNextRun, Order, Send, SendAgain, StartReading, Stop,
                                        StopCuttingAtBudget, WaitForServer)
from jobrunner.generate.dataset_budget import DatasetBudget
from jobrunner.generate.decode_clock import DecodeClock
from jobrunner.shared.output import OutputTotals
from jobrunner.shared.prompts import Prompt
from jobrunner.sglang.rids import make_rid

log = logging.getLogger("jobrunner.generate")

# Consecutive requests failing after all retries before the server counts as lost: dispatch pauses
# until it is ready again (a pod's SGLang sidecar restarts in place, restartPolicy Always).
MAX_CONSECUTIVE_FAILURES = 20

# Prompts read ahead of the server per dataset: a tokenized chunk (jobrunner.generate.feed).
READ_AHEAD = 64


def exit_code(states: dict[str, str], transient_failures: dict[str, int], shutdown: bool, server_lost: bool) -> int:
    """The process exit status: 0 when every dataset got what it could; 75 when a dataset's transient
    failures left it rows to redo, or the server was lost for good (run again to resume); 143 when
    SIGTERM stopped it with work left. A drained, evicted or preempted pod that exited 0 would be
    Succeeded, and its Job Complete: its replica's share would never be generated."""
    if shutdown:
        done = all(state in DATASET_DONE for state in states.values())
        return exit_codes.OK if done else exit_codes.interrupted(signal.SIGTERM)
    if server_lost:
        return exit_codes.RETRY_LATER
    if any(transient_failures.get(name) and state != DatasetState.BUDGET_MET for name, state in states.items()):
        return exit_codes.RETRY_LATER
    return exit_codes.OK


@dataclass
class Lane:
    """A dataset's place in the scheduler: its prompts read and waiting for the server, in order."""

    budget: DatasetBudget
    fresh: deque[tuple[Prompt, float]] = field(default_factory=deque)  # read, with when each was ready
    again: deque[tuple[Prompt, float]] = field(default_factory=deque)  # to send again, before the fresh
    reading: bool = False  # its turn came: its rows are read
    rows_read: bool = False  # every row is read
    classes_sent: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return self.budget.name

    def head(self) -> Prompt | None:
        queue = self.again or self.fresh
        return queue[0][0] if queue else None

    def rows_out(self) -> bool:
        """No fresh row is left to send (rows sent again may still come)."""
        return self.rows_read and not self.fresh

    def rows_used(self) -> bool:
        return self.rows_read and not self.fresh and not self.again


class Scheduler:
    def __init__(self, budgets: Sequence[DatasetBudget], classes: Mapping[str, PromptClass], clock: DecodeClock,
                 run_key: str, context_length: int | None = None):
        self.lanes = {b.name: Lane(b) for b in budgets}  # in the run's order
        self.classes = classes
        self.clock = clock  # the server's, shared by every dataset (its old bins are forgotten here)
        self.run_key = run_key  # a fresh part of every rid of this process
        self.context_length = context_length  # the server's: known once it answers
        self.in_flight = {name: 0 for name in classes}  # requests in flight per class
        self.sends: dict[str, int] = {}  # by sample id: times sent, for a fresh rid on each
        self.next_to_start = 0  # index of the first dataset whose turn has not come
        self.consecutive_failures = 0
        self.waiting_for_server = False
        self.lost: str | None = None  # why the server was given up for this process
        self.shutting_down = False

    def budget(self, name: str) -> DatasetBudget:
        return self.lanes[name].budget

    # ---- what to send now -----------------------------------------------------------------------

    def schedule(self, now: float) -> list[Order]:
        """Start the datasets whose turn has come and send every prompt that may go, until nothing more may."""
        orders: list[Order] = []
        while True:
            started, sent = self._start_next(now), self._send_what_may_go(now)
            orders += started + sent
            # Once more only where something changed that another dataset's answer depends on: a
            # dataset started, or one sent while another waits (its reach may have moved) or is still
            # to start (the one that sent may now let it).
            waiting = sum(lane.head() is not None for lane in self.lanes.values()) > 1
            if not started and not (sent and (waiting or self.next_to_start < len(self.lanes))):
                return orders

    def _start_next(self, now: float) -> list[Order]:
        """The next dataset starts once the one before is out of fresh rows, done, covered within its
        reach, or waiting for a full class while another class has room. One at its budget already
        is passed over."""
        orders: list[Order] = []
        lanes = list(self.lanes.values())
        while self.next_to_start < len(lanes) and not (self.shutting_down or self.lost):
            if self.next_to_start and not self.lets_the_next_start(lanes[self.next_to_start - 1], now):
                break
            lane = lanes[self.next_to_start]
            self.next_to_start += 1
            if lane.budget.is_done():
                log.info("%s: at its budget already (%d/%d tokens), skipped", lane.name, lane.budget.tokens,
                         lane.budget.budget_tokens)
                orders += self._route(lane, lane.budget.stop(), now)
                continue
            lane.reading = True
            orders += [Order(lane.name, StartReading()), *self._route(lane, lane.budget.start(now), now)]
        return orders

    def _send_what_may_go(self, now: float) -> list[Order]:
        """The datasets in the run's order, each sending its prompts in its rows' order."""
        orders: list[Order] = []
        for lane in self.lanes.values():
            while (prompt := lane.head()) is not None and self.may_send(lane, prompt, now):
                orders += self._send(lane, now)
        return orders

    def may_send(self, lane: Lane, prompt: Prompt, now: float) -> bool:
        return (not self.waiting_for_server and self.may_take_slot(prompt.prompt_class, now)
                and lane.budget.may_send(now, self.reach(lane, now)))

    def _send(self, lane: Lane, now: float) -> list[Order]:
        prompt, ready_at = (lane.again or lane.fresh).popleft()
        sample_id = names.sample_id(lane.name, prompt.row)
        # A row sent again gets a fresh rid: the server may still hold the old one.
        sends = self.sends[sample_id] = self.sends.get(sample_id, -1) + 1
        rid = make_rid(self.run_key, sample_id, sends)
        max_new_tokens = lane.budget.max_new_tokens(prompt, now)
        self.in_flight[prompt.prompt_class] += 1
        lane.classes_sent.add(prompt.prompt_class)
        send = Order(lane.name, Send(prompt, rid, max_new_tokens, now - ready_at))
        return [send, *self._route(lane, lane.budget.sent(prompt, rid, now, max_new_tokens), now)]

    def lets_the_next_start(self, lane: Lane, now: float) -> bool:
        return (not lane.budget.wants_more() or lane.rows_out() or self.holds_up(lane)
                or lane.budget.is_covered(now, self.reach(lane, now)))

    def holds_up(self, lane: Lane) -> bool:
        """The dataset's next prompt waits for a full class while another class has free slots:
        the next dataset may use them meanwhile."""
        prompt = lane.head()
        if prompt is None:
            return False
        waiting = self.classes[prompt.prompt_class]
        return self.in_flight[waiting.name] >= waiting.concurrency and any(
            self.in_flight[c.name] < c.concurrency for c in self.classes.values() if c.name != waiting.name)

    # ---- the class slots --------------------------------------------------------------------------

    def may_take_slot(self, prompt_class: str, now: float) -> bool:
        """Whether a request of `prompt_class` may be sent: a slot of its own, or one an idle class lends."""
        cls = self.classes[prompt_class]
        # The idle classes only matter to a full class: they are not worked out on every wake-up.
        return self.in_flight[cls.name] < cls.concurrency or class_slots.may_take_slot(
            cls, self.classes, self.in_flight, self.idle_classes(now), self.context_length)

    def idle_classes(self, now: float) -> set[str]:
        """The prompt classes no dataset of this process may still send to (one that has sent
        nothing yet may send to any): their free slots are lent."""
        busy: set[str] = set()
        for lane in self.lanes.values():
            if self.takes_slots(lane, now, Reach.HOLDING):
                busy |= lane.classes_sent or set(self.classes)
        return set(self.classes) - busy

    def takes_slots(self, lane: Lane, now: float, reach: Reach) -> bool:
        """Whether the dataset would send a request now within `reach` if a slot were free: a slot
        held back by another dataset can go to it (one that is itself holding back takes nothing)."""
        return lane.budget.may_still_send() and not lane.rows_out() and not lane.budget.is_covered(now, reach)

    def reach(self, lane: Lane, now: float) -> Reach:
        """How far the dataset may fill the slots, cutting at the budget: within its share of what
        is left while another dataset of the process would take a free slot within its own, to
        what is left while another would take one at all, and to the cut when none would (one
        that has sent nothing yet may take a slot of any class). So the datasets interleave, and
        only the process's very end fills every slot with one dataset."""
        if not lane.budget.cuts_at_budget:
            return Reach.HOLDING  # aborting at the budget, the reach is not used
        others = [o for o in self.lanes.values() if o is not lane
                  and (not o.classes_sent or o.classes_sent & lane.classes_sent)]
        room = lane.budget.room(now)
        for reach, further in ((Reach.INTERLEAVED, Reach.HOLDING), (Reach.HOLDING, Reach.FILLING)):
            # Another dataset takes a free slot within this reach, or, every other one covered,
            # one with more room would take it further: that one goes first, its requests have
            # the most time to end on their own before its cut.
            if any(self.takes_slots(o, now, reach)
                   or (o.budget.room(now) > room and self.takes_slots(o, now, further)) for o in others):
                return reach
        return Reach.FILLING

    # ---- the rows read --------------------------------------------------------------------------

    def room_for_rows(self, name: str) -> int | None:
        """How many more prompts the dataset's reader may offer now: none until half of what it read
        ahead is sent, so it wakes once a half, not once a request; None: it wants no more rows."""
        lane = self.lanes[name]
        if self.shutting_down or self.lost or not lane.budget.wants_more():
            return None
        return READ_AHEAD - len(lane.fresh) if len(lane.fresh) <= READ_AHEAD // 2 else 0

    def wants_rows(self) -> bool:
        """Whether a reader has something to do: room for rows, or an end to its reading."""
        return any(lane.reading and not lane.rows_read and self.room_for_rows(lane.name) != 0
                   for lane in self.lanes.values())

    def offer(self, name: str, prompt: Prompt, now: float) -> None:
        self.lanes[name].fresh.append((prompt, now))

    def rows_read(self, name: str) -> None:
        self.lanes[name].rows_read = True

    # ---- what happened to a request ---------------------------------------------------------------

    def answered(self, name: str, prompt: Prompt, rid: str, result: GenerateResult, e2e_s: float,
                 now: float) -> list[Order]:
        if prompt.response_ids is None:
            self.consecutive_failures = 0  # the server answered (a trace is read, not asked)
        lane = self.lanes[name]
        return self._route(lane, lane.budget.answered(prompt, rid, result, e2e_s, now), now)

    def kept(self, name: str, result: GenerateResult, generated: int | None, e2e_s: float, now: float) -> list[Order]:
        lane = self.lanes[name]
        return self._route(lane, lane.budget.kept(result, generated, e2e_s, now), now)

    def skipped(self, name: str, row: int, rid: str) -> None:
        """The server refused the request for good (its row is recorded as skipped)."""
        self.consecutive_failures = 0
        self.lanes[name].budget.skipped(row, rid)

    def failed(self, name: str, row: int, rid: str, reason: str, now: float) -> list[Order]:
        lane = self.lanes[name]
        return self._route(lane, lane.budget.failed(row, rid, reason), now)

    def finished(self, name: str, prompt: Prompt, rid: str, now: float) -> list[Order]:
        """The request's Task ended: its slot is free, and the clock forgets what no request in flight needs."""
        self.in_flight[prompt.prompt_class] -= 1
        lane = self.lanes[name]
        actions = lane.budget.finished(prompt.row, rid, now)
        oldest = min((r.sent_at for o in self.lanes.values() for r in o.budget.requests.values()), default=now)
        self.clock.forget_before(oldest)
        return self._route(lane, actions, now)

    def tick(self, name: str, now: float) -> list[Order]:
        lane = self.lanes[name]
        return self._route(lane, lane.budget.tick(now), now)

    def peers_reported(self, peers: Mapping[str, dict[int, DatasetProgress]], stopped: set[str],
                       now: float) -> list[Order]:
        """The coordinator's view: the other replicas' reports per dataset, and the datasets done elsewhere."""
        return [order for lane in self.lanes.values() for order in self._route(
            lane, lane.budget.peers_reported(peers.get(lane.name, {}), lane.name in stopped, now), now)]

    # ---- the process ----------------------------------------------------------------------------

    def shut_down(self) -> list[Order]:
        """SIGTERM, or a failure that ends the run: every dataset stops, every request in flight is aborted."""
        self.shutting_down = True
        return self._stop_all()

    def server_back(self) -> None:
        self.waiting_for_server = False
        self.consecutive_failures = 0

    def server_lost(self, reason: str) -> list[Order]:
        """The server did not come back: every dataset stops, and the process exits to be run again."""
        self.waiting_for_server = False
        self.lost = reason
        return self._stop_all()

    def stop_cutting_at_budget(self) -> None:
        """Nothing can be kept of a cut on this server: every dataset aborts at the budget instead."""
        for lane in self.lanes.values():
            lane.budget.stop_cutting_at_budget()

    def is_over(self) -> bool:
        """Every dataset stopped or sent all its rows, and nothing is in flight."""
        return all((lane.budget.stopped or lane.rows_used()) and not lane.budget.in_flight()
                   for lane in self.lanes.values())

    def progress(self, name: str, durable: OutputTotals, now: float) -> DatasetProgress:
        lane = self.lanes[name]
        return lane.budget.progress(durable, now, lane.rows_used())

    def exit_status(self) -> int:
        states = {lane.name: lane.budget.state(lane.rows_used()) for lane in self.lanes.values()}
        failures = {lane.name: lane.budget.transient_failures for lane in self.lanes.values()}
        return exit_code(states, failures, self.shutting_down, bool(self.lost))

    # ---- routing --------------------------------------------------------------------------------

    def _stop_all(self) -> list[Order]:
        return [order for lane in self.lanes.values() for order in self._route(lane, lane.budget.stop(), 0.0)]

    def _route(self, lane: Lane, actions: list[Action], now: float) -> list[Order]:
        """A budget's actions as orders: the rows to send again queued, a stop's unsent rows dropped,
        cutting turned off for every dataset, failures counted."""
        orders: list[Order] = []
        for action in actions:
            match action:
                case SendAgain(prompts):
                    lane.again.extend((p, now) for p in prompts)
                    continue
                case Stop():
                    lane.fresh.clear()
                    lane.again.clear()
                case StopCuttingAtBudget():
                    self.stop_cutting_at_budget()
                case LeaveForNextRun(row, reason):
                    orders.append(Order(lane.name, action))
                    orders += self._count_failure(f"{names.sample_id(lane.name, row)}: {reason}")
                    continue
            orders.append(Order(lane.name, action))
        return orders

    def _count_failure(self, message: str) -> list[Order]:
        """Twenty requests in a row failing after their retries: the server is waited for."""
        self.consecutive_failures += 1
        if self.consecutive_failures < MAX_CONSECUTIVE_FAILURES or self.waiting_for_server or self.lost:
            return []
        self.waiting_for_server = True
        reason = f"{self.consecutive_failures} requests in a row failed after retries; last: {message}"
        return [Order("", WaitForServer(reason))]
