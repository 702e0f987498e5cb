"""The generation engine: datasets in order, class concurrency, budgets, abort at the server
(the package's docstring tells the whole flow)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
import uuid
from collections.abc import Callable

import aiohttp

from draftgen_contracts import budget, budget_shares, exit_codes, names
from draftgen_contracts.progress import ProgressDocument
from draftgen_contracts.sglang_protocol import BadRequest, GenerateResult, InvalidResponse, RequestFailed, SGLangError
from draftgen_contracts.states import DatasetState
from jobrunner.config import GenerateConfig
from jobrunner.coordination import Coordinator
from jobrunner.datasets import read_rows
from jobrunner.generate import class_slots, provenance
from jobrunner.generate.dataset_run import DatasetRun, InFlight, replica_sample_cap, sampling_params_for
from jobrunner.generate.decode_clock import DecodeClock
from jobrunner.generate.feed import prepared_prompts
from jobrunner.output import PartWriter, other_parts
from jobrunner.prompts import Prompt, PromptPreparer
from jobrunner.sglang.client import SGLangClient
from jobrunner.sglang.rids import make_rid

log = logging.getLogger("jobrunner.generate")

# Consecutive requests failing after all retries before the server counts as lost: dispatch pauses
# until it is ready again (a pod's SGLang sidecar restarts in place, restartPolicy Always).
MAX_CONSECUTIVE_FAILURES = 20


def exit_code(states: dict[str, str], transient_failures: int, shutdown: bool, server_lost: bool) -> int:
    """The process exit status: 0 when every dataset got what it could (or on SIGTERM), 75 when
    transient failures left rows to redo or the server was lost for good (run again to resume)."""
    if shutdown:
        return exit_codes.OK
    if server_lost:
        return exit_codes.RETRY_LATER
    if transient_failures and any(s != DatasetState.BUDGET_MET for s in states.values()):
        return exit_codes.RETRY_LATER
    return exit_codes.OK


class Engine:
    def __init__(self, config: GenerateConfig, client: SGLangClient, coordinator: Coordinator,
                 tokenizer=None, context_length: int | None = None):
        self.config = config
        self.client = client
        self.coordinator = coordinator
        self.tokenizer = tokenizer
        self.context_length = context_length
        # A fresh part per process in every rid: a request of a killed predecessor may still run
        # on the server under the old rid, and a duplicate rid is a 400.
        self.run_key = f"{config.run_id}/r{config.replica}/{uuid.uuid4().hex[:12]}"
        self.classes = {c.name: c for c in config.prompt_class_table()}
        self.class_in_flight = {name: 0 for name in self.classes}
        self.runs: list[DatasetRun] = []
        self.last_progress: ProgressDocument | None = None  # the last report published (read by the metrics)
        self._changed = asyncio.Event()
        self._shutdown = False
        self._lost: str | None = None  # why the server was given up for this process
        self._reconnecting: asyncio.Task | None = None  # waiting for a lost server to be ready again
        self._consecutive_failures = 0
        self._abort_tasks: set[asyncio.Task] = set()
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tokenize")

    # ---- waiting ------------------------------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()

    async def _wait_until(self, predicate: Callable[[], bool]) -> None:
        # Single-threaded: nothing can change between the check and the clear.
        while not predicate():
            self._changed.clear()
            await self._changed.wait()

    # ---- lifecycle ----------------------------------------------------------------------------

    async def run(self) -> int:
        # Resumed totals first, published before the wait for the server (minutes for a large
        # model): no fold of the replicas' reports meanwhile takes this replica's part for zero.
        # A replica that cannot publish even once cannot share a budget: it fails, and its Job retries.
        self._open_datasets()
        try:
            self._publish()
            await self._connect()
        except BaseException:
            for run in self.runs:
                run.writer.close()
            raise
        publisher = asyncio.create_task(self._publish_loop())
        feeds: list[asyncio.Task] = []
        try:
            await self._feed_in_order(feeds)
            await self._wait_until(lambda: all(f.done() for f in feeds) and not any(r.in_flight for r in self.runs))
            for feed in feeds:
                feed.result()
        finally:
            await self._wind_down(feeds, publisher)
        if self._lost:
            log.error("the server is lost: %s; run again to resume", self._lost)
        states = {r.name: r.state() for r in self.runs}
        return exit_code(states, sum(r.transient_failures for r in self.runs), self._shutdown, bool(self._lost))

    async def _connect(self) -> None:
        """Wait for the server; learn the context length from it when the config does not say."""
        await self.client.wait_ready(self.config.startup_timeout_s)
        await self._record_provenance()
        if self.context_length is None:
            self.context_length = self.config.context.length or (await self.client.model_info()).max_model_len
            if not self.context_length:
                raise SGLangError("the server did not report max_model_len; set context.length")

    async def _record_provenance(self) -> None:
        """This session's server, model and settings, before the first request (a server that cannot
        say its version is recorded as such: the samples must not wait for it)."""
        try:
            info, error = await self.client.server_info(), None
        except (SGLangError, aiohttp.ClientError, asyncio.TimeoutError) as e:
            info, error = {}, f"/server_info: {e}"
            log.warning("the server did not say its version and args: %s", error)
        entry = provenance.session(self.config, info, self.tokenizer, server_error=error)
        provenance.record_session(self.config.output_root, self.config.replica, entry)

    def _open_datasets(self) -> None:
        cfg = self.config
        previous = self.coordinator.previous_own()
        largest_max_new = max(c.max_new_tokens for c in self.classes.values())
        # One server per process: one decode clock for every dataset. Its bins are a small part
        # of the publish interval, the time scale of every other decision.
        clock = DecodeClock(time.monotonic(), bin_s=cfg.progress_interval_s / 20)
        for index, d in enumerate(cfg.datasets):
            writer = PartWriter(cfg.output_root, d.name, cfg.replica)
            elsewhere = other_parts(cfg.output_root, d.name, cfg.replica, cfg.replicas)
            run = DatasetRun(d, writer, replica_sample_cap(d.sample_cap, cfg.replicas, cfg.replica),
                             max_new_tokens=d.max_new_tokens or largest_max_new,
                             replicas=cfg.replicas, replica=cfg.replica,
                             first_receiver=budget_shares.first_receiver(index, cfg.replicas),
                             cut=cfg.at_budget == budget_shares.CUT, clock=clock, elsewhere=elsewhere)
            # Settling is for good under one budget: a restarted replica keeps its predecessor's
            # word, which the replica finishing the dataset may already have counted on.
            before = previous.datasets.get(d.name) if previous else None
            run.settled = bool(before and before.settled and before.budget_tokens == d.budget_tokens)
            self.runs.append(run)
        for index, run in enumerate(self.runs):
            run.later = self.runs[index + 1:]
        self._refresh_coordination()

    async def _feed_in_order(self, feeds: list[asyncio.Task]) -> None:
        """Start each dataset's feed in turn. The next dataset starts once this one is out of rows,
        its requests in flight are expected to bring all it may still add, or it waits for a full
        class while another class has room; a feed goes on and dispatches again if its requests
        fall short."""
        for run in self.runs:
            if self._shutdown or self._lost:
                return
            if run.is_done():
                log.info("%s: at its budget already (%d/%d tokens), skipped", run.name, run.tokens,
                         run.config.budget_tokens)
                run.stopping = True
                continue
            feed = asyncio.create_task(self._feed(run))
            feed.add_done_callback(lambda _t: self._notify())
            feeds.append(feed)
            await self._wait_until(lambda: feed.done() or run.rows_exhausted or run.is_covered()
                                   or self._blocked_on_class(run))
            if feed.done():
                feed.result()  # a feed that failed fails the run

    async def _wind_down(self, feeds: list[asyncio.Task], publisher: asyncio.Task) -> None:
        """However the run ends: feeds cancelled, in-flight requests aborted when it stopped early,
        the last progress published, the part files closed."""
        for feed in feeds:
            feed.cancel()
        for run in self.runs:
            if run.cut_timer is not None:
                run.cut_timer.cancel()
        await asyncio.gather(*feeds, return_exceptions=True)
        if self._shutdown or self._lost:
            await self._abort_everything()
        await self._drain_aborts()
        publisher.cancel()
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        await asyncio.gather(publisher, *filter(None, [self._reconnecting]), return_exceptions=True)
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._publish(finished=True)
        for run in self.runs:
            run.writer.close()

    def request_shutdown(self) -> None:
        """SIGTERM: stop dispatching; the run then aborts what is in flight and returns."""
        self._shutdown = True
        for run in self.runs:
            self._stop(run)
        self._notify()

    # ---- dispatch -----------------------------------------------------------------------------

    async def _feed(self, run: DatasetRun) -> None:
        d = run.config
        run.started = True
        self._rebalance(run)  # a share smaller than one response settles before sending anything
        preparer = PromptPreparer(
            tokenizer=self.tokenizer, template_kwargs=self.config.template_kwargs_for(d),
            classes=list(self.classes.values()), context_length=self.context_length,
            policy=self.config.context.policy, min_room=self.config.context.min_room_tokens,
            class_override=d.prompt_class, max_new_tokens_override=d.max_new_tokens,
        )
        rows = read_rows(d.path, d.format, pretokenized=d.pretokenized, traces=d.kind == "traces",
                         replica=self.config.replica, replicas=self.config.replicas)
        prompts = prepared_prompts(rows, preparer.prepare, run.writer.is_done, self._executor)
        try:
            async for item in prompts:
                if not isinstance(item, Prompt):
                    run.writer.append_skip(item.row, item.reason, item.detail)
                    continue
                if not await self._send_requeued(run) or not await self._send(run, item):
                    return
            # Out of new rows (the next dataset may start); the rows of trimmed requests may still
            # come back until none is in flight.
            run.rows_exhausted = True
            while True:
                await self._wait_until(lambda: run.requeued or not run.in_flight or not self._wants_more(run))
                if not run.requeued or not await self._send_requeued(run):
                    break
        finally:
            await prompts.aclose()

    async def _send_requeued(self, run: DatasetRun) -> bool:
        while run.requeued:
            if not await self._send(run, run.requeued.popleft()):
                return False
        return True

    async def _send(self, run: DatasetRun, prompt: Prompt) -> bool:
        """Dispatch `prompt` once its class and the budget allow; False when the dataset wants no more."""
        ready_at = time.monotonic()
        run.waiting_for_class = prompt.prompt_class
        try:
            await self._wait_until(lambda: self._can_dispatch(run, prompt) or not self._wants_more(run))
        finally:
            run.waiting_for_class = None
        if not self._wants_more(run):
            return False
        self._dispatch(run, prompt, time.monotonic() - ready_at)
        return True

    def _blocked_on_class(self, run: DatasetRun) -> bool:
        """The dataset's next prompt waits for a full class while another class has free slots."""
        waiting = run.waiting_for_class
        return waiting is not None and self.class_in_flight[waiting] >= self.classes[waiting].concurrency and any(
            self.class_in_flight[c.name] < c.concurrency for c in self.classes.values() if c.name != waiting)

    def _wants_more(self, run: DatasetRun) -> bool:
        """False once the dataset is done for this process (budget, cap, stop, shutdown, failure)."""
        if run.stopping or self._shutdown or self._lost:
            return False
        if run.is_done():
            self._stop(run)
            return False
        return True

    def _idle_classes(self) -> set[str]:
        """The prompt classes no dataset of this process may still send to (one that has sent
        nothing yet may send to any): their free slots are lent (class_slots)."""
        busy: set[str] = set()
        for r in self.runs:
            if r.may_take_slots():
                busy |= r.classes_sent or set(self.classes)
        return set(self.classes) - busy

    def _can_dispatch(self, run: DatasetRun, prompt: Prompt) -> bool:
        if self._reconnecting is not None:
            return False
        cls = self.classes[prompt.prompt_class]
        # The idle classes only matter to a full class: they are not worked out on every wake-up.
        if self.class_in_flight[cls.name] >= cls.concurrency and not class_slots.may_take_slot(
                cls, self.classes, self.class_in_flight, self._idle_classes(), self.context_length):
            return False
        if run.config.concurrency is not None and len(run.in_flight) >= run.config.concurrency:
            return False
        return run.should_dispatch()

    def _dispatch(self, run: DatasetRun, prompt: Prompt, queued_s: float) -> None:
        # A row sent again after a trim gets a fresh rid: the server may still hold the old one.
        sends = run.sends[prompt.row] = run.sends.get(prompt.row, -1) + 1
        rid = make_rid(self.run_key, names.sample_id(run.name, prompt.row), sends)
        work = self._replay(run, prompt, rid, queued_s) if prompt.response_ids is not None else \
            self._request(run, prompt, rid, queued_s)
        task = asyncio.create_task(work, name=rid)
        entry = run.in_flight[prompt.row] = InFlight(task, rid, prompt, time.monotonic())
        run.classes_sent.add(prompt.prompt_class)
        run.changed()
        self.class_in_flight[prompt.prompt_class] += 1
        # A done callback, not a `finally`: a Task cancelled before its first step never enters
        # its body, but its callbacks always run.
        task.add_done_callback(lambda _t: self._finished(run, entry))
        self._plan_cut(run)
        self._notify()  # the dispatch may have made the in-flight requests cover the budget

    def _finished(self, run: DatasetRun, entry: InFlight) -> None:
        if run.in_flight.get(entry.prompt.row) is entry:
            del run.in_flight[entry.prompt.row]
        if entry.cut:
            run.cutting -= 1
        in_flight = [f.dispatched_at for r in self.runs for f in r.in_flight.values()]
        run.clock.forget_before(min(in_flight, default=time.monotonic()))
        run.changed()
        self.class_in_flight[entry.prompt.prompt_class] -= 1
        self._rebalance(run)
        self._notify()

    async def _replay(self, run: DatasetRun, prompt: Prompt, rid: str, queued_s: float) -> None:
        """An existing trace (kind `traces`): its response kept as it is, the server never asked. It
        goes through the same budget, record and resume path as a generated response."""
        result = GenerateResult(prompt.response_ids, prompt.finish_reason, len(prompt.input_ids),
                                len(prompt.response_ids), rid)
        # Never cut: a trace costs no GPU time, and the rest of it is worth keeping.
        self._write(run, prompt, {}, result, queued_s, 0.0)

    async def _request(self, run: DatasetRun, prompt: Prompt, rid: str, queued_s: float) -> None:
        params = sampling_params_for(run.config, prompt)
        started = time.monotonic()
        try:
            result = await self.client.generate(prompt.input_ids, params, rid, **run.config.extra_request_fields)
        except BadRequest as e:
            self._consecutive_failures = 0
            run.writer.append_skip(prompt.row, e.skip_reason, e.message)
        except InvalidResponse as e:
            self._consecutive_failures = 0
            run.writer.append_skip(prompt.row, "invalid_response", str(e))
        except RequestFailed as e:
            self._transient_failure(run, f"{names.sample_id(run.name, prompt.row)}: {e}")
        except Exception as e:  # anything unexpected: keep the row for the next run, say why
            log.exception("%s: request failed", names.sample_id(run.name, prompt.row))
            self._transient_failure(run, f"{names.sample_id(run.name, prompt.row)}: {type(e).__name__}: {e}")
        else:
            self._consecutive_failures = 0
            entry = run.in_flight.get(prompt.row)
            cut_by_us = entry is not None and entry.rid == rid and entry.cut
            if (result.finish_reason == "abort" and cut_by_us) or (
                    run.cut and result.finish_reason != "abort"
                    and result.completion_tokens > run.remaining(time.monotonic())):
                # Cut at the budget, or ended on its own past what this replica may add (it came
                # back before the cut reached it): kept up to the budget.
                self._write_cut(run, prompt, params, result, queued_s, time.monotonic() - started)
            elif result.finish_reason == "abort":
                # Aborted by the server on its own (our own aborts come with a cancelled Task,
                # whose answer is never read): not a response; the next run generates the row again.
                if not run.stopping:
                    self._transient_failure(run, f"{names.sample_id(run.name, prompt.row)}: aborted by the server")
            else:
                self._write(run, prompt, params, result, queued_s, time.monotonic() - started)

    def _write_cut(self, run: DatasetRun, prompt: Prompt, params: dict, result: GenerateResult, queued_s: float,
                   e2e_s: float) -> None:
        """A request cut at the budget: its partial response kept, cut to what this replica may
        still add (the tokens past it are the excess). A request that had made nothing is sent
        again if the dataset still wants more."""
        now = time.monotonic()
        if result.output_lost:
            self._stop_cutting()
        room = run.remaining(now)
        output_ids = result.output_ids[:room]
        if not output_ids:
            if not result.output_lost:  # what it made (maybe nothing) still corrects the clock
                run.clock.observe(now - e2e_s, now, result.completion_tokens)
                run.changed()
            if room > 0:
                run.requeued.append(prompt)
            return
        cut = GenerateResult(output_ids, "length", result.prompt_tokens, len(output_ids), result.rid, result.attempts)
        self._write(run, prompt, params, cut, queued_s, e2e_s, generated=result.completion_tokens)

    def _stop_cutting(self) -> None:
        """The server answered an aborted request with an error instead of its output (some SGLang
        versions answer 400 or 500, docs/sglang.md): nothing can be kept of a cut, so every dataset
        aborts at the budget from now on, as with `at_budget: abort`."""
        if any(r.cut for r in self.runs):
            log.warning("the server answers aborted requests without their output: cutting at the budget is "
                        "off for this process; requests in flight at the budget are aborted instead")
        for r in self.runs:
            r.cut = False
            r.changed()

    def _write(self, run: DatasetRun, prompt: Prompt, params: dict, result, queued_s: float, e2e_s: float,
               generated: int | None = None) -> None:
        """Append the record of a response. `generated`: the tokens the server made for a response
        cut at the budget (its record keeps `result.output_ids`, `cut_at_budget` says so)."""
        now = time.time()
        run.writer.append_record({
            "sample_id": names.sample_id(run.name, prompt.row),
            "dataset": run.name,
            "row": prompt.row,
            "input_ids": prompt.input_ids,
            "output_ids": result.output_ids,
            "finish_reason": result.finish_reason,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "prompt_class": prompt.prompt_class,
            "sampling_params": params,
            "rid": result.rid,
            "timings": {"queued_s": round(queued_s, 4), "e2e_s": round(e2e_s, 4), "finished_at": now},
            **({"source": "trace"} if prompt.response_ids is not None else {}),
            **({"cut_at_budget": True} if generated is not None else {}),
        })
        answered = time.monotonic()
        run.rate.add(answered, budget.kept_tokens(result.finish_reason, result.completion_tokens))
        # A cut response's length is censored where it was cut; what the server made for it is exact.
        run.record_response(result.completion_tokens if generated is None else generated, answered - e2e_s, answered,
                            cut=generated is not None)
        if run.is_done():
            self._stop(run)

    def _transient_failure(self, run: DatasetRun, message: str) -> None:
        run.transient_failures += 1
        self._consecutive_failures += 1
        log.warning("%s (left for the next run)", message)
        if self._consecutive_failures >= MAX_CONSECUTIVE_FAILURES and self._reconnecting is None and not self._lost:
            reason = f"{self._consecutive_failures} requests in a row failed after retries; last: {message}"
            self._reconnecting = asyncio.create_task(self._reconnect(reason))

    async def _reconnect(self, reason: str) -> None:
        """The server stopped answering: no dispatch until it is ready again, as long as a start
        may take (`startup_timeout_s`). Waiting beats exiting: in a pod the server restarts in
        place, and a new pod would load the model once more. Given up, every dataset stops."""
        log.warning("the server stopped answering (%s): waiting up to %.0fs for it to be ready again",
                    reason, self.config.startup_timeout_s)
        try:
            await self.client.wait_ready(self.config.startup_timeout_s)
        except SGLangError as e:
            self._lost = f"{reason}; then {e}"
            for r in self.runs:
                self._stop(r)
        else:
            log.info("the server is ready again: dispatch goes on")
            self._consecutive_failures = 0
        finally:
            self._reconnecting = None
            self._notify()

    # ---- stopping -----------------------------------------------------------------------------

    def _stop(self, run: DatasetRun) -> None:
        """Stop a dataset now: no more dispatch, every in-flight request aborted at the server and
        its Task cancelled. Synchronous, so no completion can slip in between the decision and it."""
        if run.stopping:
            return
        run.stopping = True
        rids = self._cancel(list(run.in_flight.values()))
        if rids:
            log.info("%s: stopped at %d tokens, aborting %d in flight", run.name, run.tokens, len(rids))
        self._notify()

    def _cancel(self, entries: list[InFlight]) -> list[str]:
        """Cancel the requests' Tasks and abort them at the server; their rids."""
        rids = []
        for entry in entries:
            if not entry.task.done():
                entry.task.cancel()
                rids.append(entry.rid)
        if rids:
            self._send_aborts(rids)
        return rids

    def _send_aborts(self, rids: list[str]) -> None:
        abort = asyncio.create_task(self._abort(rids))
        self._abort_tasks.add(abort)
        abort.add_done_callback(self._abort_tasks.discard)

    def _cut(self, run: DatasetRun) -> None:
        """Cutting at the budget: the requests in flight have made what this replica may add. They
        are aborted at the server and their partial responses, which the aborted calls answer
        with, are kept (`_write_cut`); nothing is sent for the dataset until they are in."""
        entries = [e for e in run.in_flight.values() if not e.task.done() and not e.cut]
        for entry in entries:
            entry.cut = True
        run.cutting += len(entries)
        if entries:
            now = time.monotonic()
            log.info("%s: cutting %d requests in flight at %d tokens (about %d made by them, %d to add)",
                     run.name, len(entries), run.own_tokens, run.estimate(now).outlook.partial, run.remaining(now))
            self._send_aborts([e.rid for e in entries])

    def _plan_cut(self, run: DatasetRun) -> None:
        """Cut now if the requests in flight have made what remains, else look again when they
        should have: the partial lengths grow with time, not only with events."""
        if run.cut_timer is not None:
            run.cut_timer.cancel()
            run.cut_timer = None
        now = time.monotonic()
        if run.should_cut(now):
            self._cut(run)
            return
        wait = run.seconds_to_cut(now)
        if wait is not None:
            run.cut_timer = asyncio.get_running_loop().call_later(max(wait, 0.001), self._timed_cut, run)

    def _timed_cut(self, run: DatasetRun) -> None:
        run.cut_timer = None
        run.changed()  # the estimate's partial lengths have grown
        self._plan_cut(run)
        self._notify()

    def _rebalance(self, run: DatasetRun) -> None:
        """After anything that moves the estimate or the shares: abort the requests the others in
        flight make unnecessary (their rows are sent again if the rest fall short), and settle when
        this replica's share is made (budget_shares)."""
        if run.stopping or not run.started:
            return
        rows = run.rows_to_trim()
        # A request whose Task is done has written its record already: never sent again.
        rows = [row for row in rows if not run.in_flight[row].task.done()]
        if rows:
            entries = [run.in_flight.pop(row) for row in rows]
            run.requeued.extendleft(reversed([e.prompt for e in entries]))
            run.changed()
            self._cancel(entries)
            log.info("%s: %d requests in flight no longer needed, aborted", run.name, len(entries))
        if run.settled and run.is_receiver():
            run.settled = False  # every replica below has run out of rows: this one finishes the dataset
            log.info("%s: finishing the dataset for the replicas out of rows", run.name)
        elif run.should_settle():
            run.settled = True
            log.info("%s: share made (%d tokens); the receiver makes the rest", run.name, run.own_tokens)
        self._plan_cut(run)
        self._notify()

    async def _abort(self, rids: list[str]) -> None:
        results = await asyncio.gather(*(self.client.abort(rid) for rid in rids), return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            # The server still aborts them when it notices the closed connections (~4 s).
            log.warning("%d of %d aborts failed: %r", len(failed), len(rids), failed[0])

    async def _abort_everything(self) -> None:
        for run in self.runs:
            self._stop(run)
        tasks = [f.task for r in self.runs for f in r.in_flight.values()]
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _drain_aborts(self) -> None:
        if self._abort_tasks:
            await asyncio.gather(*list(self._abort_tasks), return_exceptions=True)

    # ---- progress -----------------------------------------------------------------------------

    def _refresh_coordination(self) -> None:
        stopped = self.coordinator.stopped_datasets()
        peers = self.coordinator.peers()
        for run in self.runs:
            run.set_peers(peers.get(run.name, {}))
            run.stopped_externally = run.name in stopped
            if run.started and run.is_done():
                self._stop(run)
            self._rebalance(run)
        self._notify()

    def _publish(self, finished: bool = False) -> None:
        now = time.monotonic()
        for run in self.runs:
            run.writer.sync()  # fsync before publishing: published totals are durable
        document = ProgressDocument(
            replica=self.config.replica, replicas=self.config.replicas, updated_at=time.time(), finished=finished,
            datasets={run.name: run.progress(now) for run in self.runs})
        self.coordinator.publish(document)
        self.last_progress = document

    async def _publish_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.progress_interval_s)
            try:
                self._publish()
                self._refresh_coordination()
            except OSError as e:
                log.warning("progress not published: %s", e)
            for run in self.runs:
                if run.started and not run.stopping:
                    p = run.progress(time.monotonic())
                    log.info("%s: %d/%d tokens, %d samples, %.0f tok/s, %d in flight", run.name,
                             run.tokens, run.config.budget_tokens, p.samples, p.tokens_per_second, p.in_flight)
