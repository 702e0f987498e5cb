"""The generation engine: the I/O of the datasets' controllers (jobrunner.generate.dataset_controller).
Requests sent and aborted through the client, their Tasks, the records written, the ticks the
controllers plan, progress published, the datasets started in order (the package's docstring tells
the whole flow). Every budget decision is a controller's: the engine reports what happened to it and
carries out the actions it answers with, the way a step of a serving engine runs what its scheduler
decided."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
import uuid
from collections.abc import Callable

import aiohttp

from draftgen_contracts import budget_shares, exit_codes, names
from draftgen_contracts.generation_record import CutAtBudget, GenerationRecord, Timings
from draftgen_contracts.progress import ProgressDocument
from draftgen_contracts.sglang_protocol import BadRequest, GenerateResult, InvalidResponse, RequestFailed, SGLangError
from draftgen_contracts.states import DatasetState
from jobrunner.config import DatasetConfig, GenerateConfig
from jobrunner.coordination import Coordinator
from jobrunner.dataset_files import record_file_set
from jobrunner.datasets import read_rows
from jobrunner.generate import provenance
from jobrunner.generate.actions import Abort, Action, Cut, Keep, LeaveForNextRun, Stop, StopCuttingAtBudget, Tick
from jobrunner.generate.dataset_controller import DatasetController, BudgetMode
from jobrunner.generate.decode_clock import DecodeClock
from jobrunner.generate.end_tokens import model_end_ids
from jobrunner.generate.feed import prepared_prompts
from jobrunner.generate.slot_table import SlotTable
from jobrunner.output import PartWriter, dataset_dir, other_parts
from jobrunner.prompts import Prompt, PromptPreparer
from jobrunner.sglang.client import SGLangClient
from jobrunner.sglang.rids import make_rid

log = logging.getLogger("jobrunner.generate")

# Consecutive requests failing after all retries before the server counts as lost: dispatch pauses
# until it is ready again (a pod's SGLang sidecar restarts in place, restartPolicy Always).
MAX_CONSECUTIVE_FAILURES = 20

# What an engine's `on_action` sees: the dataset's name and an action, before it is carried out.
ActionHook = Callable[[str, Action], None]


def sampling_params_for(dataset: DatasetConfig, max_new_tokens: int) -> dict:
    return {**dataset.sampling_params, "max_new_tokens": max_new_tokens}


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
                 tokenizer=None, context_length: int | None = None, on_action: ActionHook | None = None):
        self.config = config
        # The model folder the tokenizer comes from holds its configs (as for the vocabulary's size).
        self.end_ids = model_end_ids(config.tokenizer_path, tokenizer)
        self.client = client
        self.coordinator = coordinator
        self.tokenizer = tokenizer
        self.context_length = context_length
        self.on_action = on_action  # sees every action before it is carried out (the benchmarks time them)
        # A fresh part per process in every rid: a request of a killed predecessor may still run
        # on the server under the old rid, and a duplicate rid is a 400.
        self.run_key = f"{config.run_id}/r{config.replica}/{uuid.uuid4().hex[:12]}"
        self.classes = {c.name: c for c in config.prompt_classes}
        self.datasets: list[DatasetController] = []
        self.writers: dict[str, PartWriter] = {}
        self.slots = SlotTable(self.classes, self.datasets)
        self.last_progress: ProgressDocument | None = None  # the last report published (read by the metrics)
        self._tasks: dict[str, asyncio.Task] = {}  # by rid: every request whose Task has not finished
        self._sends: dict[str, int] = {}  # by sample id: times sent, for a fresh rid on each
        self._ticks: dict[str, asyncio.TimerHandle] = {}  # by dataset: the tick its controller planned
        self._wake = asyncio.Event()  # something changed: the waiting feeds look again
        self._shutdown = False
        self._lost: str | None = None  # why the server was given up for this process
        self.notices: list[str] = []  # what this process does otherwise than the spec says (ProgressDocument)
        self._reconnecting: asyncio.Task | None = None  # waiting for a lost server to be ready again
        self._consecutive_failures = 0
        self._abort_tasks: set[asyncio.Task] = set()
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tokenize")

    # ---- waiting ------------------------------------------------------------------------------

    def _notify(self) -> None:
        self._wake.set()

    async def _wait_until(self, predicate: Callable[[], bool]) -> None:
        # Single-threaded: nothing can change between the check and the clear.
        while not predicate():
            self._wake.clear()
            await self._wake.wait()

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
            for writer in self.writers.values():
                writer.close()
            raise
        publisher = asyncio.create_task(self._publish_loop())
        feeds: list[asyncio.Task] = []
        try:
            await self._feed_in_order(feeds)
            await self._wait_until(lambda: all(f.done() for f in feeds)
                                   and not any(d.in_flight() for d in self.datasets))
            for feed in feeds:
                feed.result()
        finally:
            await self._wind_down(feeds, publisher)
        if self._lost:
            log.error("the server is lost: %s; run again to resume", self._lost)
        states = {d.name: d.state() for d in self.datasets}
        return exit_code(states, sum(d.transient_failures for d in self.datasets), self._shutdown, bool(self._lost))

    async def _connect(self) -> None:
        """Wait for the server; learn the context length from it when the config does not say."""
        await self.client.wait_ready(self.config.startup_timeout_s)
        # A server that is not draftgen's (spec.server.endpoint) may keep its admin key from us: then
        # nothing can be cut, and an abort only closes the request's connection.
        await self.client.check_keys(abort_optional=not self.config.server_is_ours)
        if not self.client.can_abort:
            self._stop_cutting_at_budget("the server refuses /abort_request without its admin key (name its Secret "
                                         "in server.endpoint.adminApiKey): requests in flight at a budget are "
                                         "dropped by closing their connections, as atBudget: abort, and SGLang "
                                         "stops them within about 4 s")
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
        entry = provenance.session(self.config, info, self.tokenizer, server_error=error,
                                   secrets=self.client.keys.values())
        provenance.record_session(self.config.output_root, self.config.replica, entry)

    def _open_datasets(self) -> None:
        cfg = self.config
        previous = self.coordinator.previous_own()
        # One server per process: one decode clock for every dataset. Its bins are a small part
        # of the publish interval, the time scale of every other decision.
        clock = DecodeClock(time.monotonic(), bin_s=cfg.progress_interval_s / 20)
        for d in cfg.datasets:  # a dataset whose files would move its rows' indexes fails the run first
            record_file_set(d.path, dataset_dir(cfg.output_root, d.name))
        for index, d in enumerate(cfg.datasets):
            writer = self.writers[d.name] = PartWriter(cfg.output_root, d.name, cfg.replica)
            elsewhere = other_parts(cfg.output_root, d.name, cfg.replica, cfg.replicas)
            before = previous.datasets.get(d.name) if previous else None
            self.datasets.append(DatasetController.for_dataset(cfg, index, writer.totals, clock, before, elsewhere,
                                                               self.end_ids))
        for dataset in self.datasets:
            dataset.siblings = self.datasets
        self._refresh_coordination()

    async def _feed_in_order(self, feeds: list[asyncio.Task]) -> None:
        """Start each dataset's feed in turn. The next dataset starts once this one is out of rows,
        its requests in flight are expected to bring all it may still add, or it waits for a full
        class while another class has room; a feed goes on and dispatches again if its requests
        fall short."""
        for dataset in self.datasets:
            if self._shutdown or self._lost:
                return
            if dataset.is_done():
                log.info("%s: at its budget already (%d/%d tokens), skipped", dataset.name, dataset.tokens,
                         dataset.budget_tokens)
                self._carry_out(dataset, dataset.stop())
                continue
            feed = asyncio.create_task(self._feed(dataset))
            feed.add_done_callback(lambda _t: self._notify())
            feeds.append(feed)
            await self._wait_until(lambda: feed.done() or dataset.lets_the_next_start(time.monotonic())
                                   or self.slots.holds_up(dataset))
            if feed.done():
                feed.result()  # a feed that failed fails the run

    async def _wind_down(self, feeds: list[asyncio.Task], publisher: asyncio.Task) -> None:
        """However the run ends: feeds cancelled, in-flight requests aborted when it stopped early,
        the last progress published, the part files closed."""
        for feed in feeds:
            feed.cancel()
        for tick in self._ticks.values():
            tick.cancel()
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
        for writer in self.writers.values():
            writer.close()

    def request_shutdown(self) -> None:
        """SIGTERM: stop dispatching; the run then aborts what is in flight and returns."""
        self._shutdown = True
        for dataset in self.datasets:
            self._carry_out(dataset, dataset.stop())
        self._notify()

    # ---- dispatch -----------------------------------------------------------------------------

    async def _feed(self, dataset: DatasetController) -> None:
        d = dataset.config
        self._carry_out(dataset, dataset.start(time.monotonic()))
        preparer = PromptPreparer(
            tokenizer=self.tokenizer, template_kwargs=self.config.template_kwargs_for(d),
            classes=list(self.classes.values()), context_length=self.context_length,
            policy=self.config.context.policy, min_room=self.config.context.min_room_tokens,
            class_override=d.prompt_class, max_new_tokens_override=d.max_new_tokens,
        )
        rows = read_rows(d.path, d.format, pretokenized=d.pretokenized, traces=d.kind == "traces",
                         replica=self.config.replica, replicas=self.config.replicas, fields=d.fields)
        writer = self.writers[d.name]
        prompts = prepared_prompts(rows, preparer.prepare, writer.is_done, self._executor)
        try:
            async for item in prompts:
                if not isinstance(item, Prompt):
                    writer.append_skip(item.row, item.reason, item.detail)
                    continue
                if not await self._send_requeued(dataset) or not await self._send(dataset, item):
                    return
            # Out of new rows (the next dataset may start); the rows of trimmed requests may still
            # come back until none is in flight.
            dataset.rows_ran_out()
            while True:
                await self._wait_until(lambda: dataset.requeued or not dataset.in_flight()
                                       or not self._wants_more(dataset))
                if not dataset.requeued or not await self._send_requeued(dataset):
                    break
        finally:
            await prompts.aclose()

    async def _send_requeued(self, dataset: DatasetController) -> bool:
        while (prompt := dataset.next_requeued()) is not None:
            if not await self._send(dataset, prompt):
                return False
        return True

    async def _send(self, dataset: DatasetController, prompt: Prompt) -> bool:
        """Dispatch `prompt` once its class and the budget allow; False when the dataset wants no more."""
        ready_at = time.monotonic()
        dataset.waits_for_class(prompt.prompt_class)
        try:
            await self._wait_until(lambda: self._can_dispatch(dataset, prompt) or not self._wants_more(dataset))
        finally:
            dataset.waits_for_class(None)
        if not self._wants_more(dataset):
            return False
        self._dispatch(dataset, prompt, time.monotonic() - ready_at)
        return True

    def _wants_more(self, dataset: DatasetController) -> bool:
        """False once the dataset is done for this process (budget, cap, stop, shutdown, failure)."""
        return not self._shutdown and not self._lost and dataset.wants_more()

    def _can_dispatch(self, dataset: DatasetController, prompt: Prompt) -> bool:
        if self._reconnecting is not None:
            return False
        now = time.monotonic()
        return self.slots.may_take(prompt.prompt_class, self.context_length, now) and dataset.may_send(now)

    def _dispatch(self, dataset: DatasetController, prompt: Prompt, queued_s: float) -> None:
        sample_id = names.sample_id(dataset.name, prompt.row)
        # A row sent again after a trim gets a fresh rid: the server may still hold the old one.
        sends = self._sends[sample_id] = self._sends.get(sample_id, -1) + 1
        rid = make_rid(self.run_key, sample_id, sends)
        now = time.monotonic()
        max_new_tokens = dataset.max_new_tokens(prompt, now)
        work = self._replay(dataset, prompt, rid, queued_s) if prompt.response_ids is not None else \
            self._request(dataset, prompt, rid, max_new_tokens, queued_s)
        task = self._tasks[rid] = asyncio.create_task(work, name=rid)
        self.slots.take(prompt.prompt_class)
        actions = dataset.sent(prompt, rid, now, max_new_tokens)
        # A done callback, not a `finally`: a Task cancelled before its first step never enters
        # its body, but its callbacks always run.
        task.add_done_callback(lambda _t: self._finished(dataset, prompt, rid))
        self._carry_out(dataset, actions)
        self._notify()  # the dispatch may have made the in-flight requests cover the budget

    def _finished(self, dataset: DatasetController, prompt: Prompt, rid: str) -> None:
        del self._tasks[rid]
        self.slots.free(prompt.prompt_class)
        self._carry_out(dataset, dataset.finished(prompt.row, rid, time.monotonic()))
        self._notify()

    async def _replay(self, dataset: DatasetController, prompt: Prompt, rid: str, queued_s: float) -> None:
        """An existing trace (kind `traces`): its response kept as it is, the server never asked. It
        goes through the same budget, record and resume path as a generated response."""
        result = GenerateResult(prompt.response_ids, prompt.finish_reason, len(prompt.input_ids),
                                len(prompt.response_ids), rid)
        self._answer(dataset, prompt, rid, {}, result, queued_s, 0.0)

    async def _request(self, dataset: DatasetController, prompt: Prompt, rid: str, max_new_tokens: int,
                       queued_s: float) -> None:
        params = sampling_params_for(dataset.config, max_new_tokens)
        writer = self.writers[dataset.name]
        started = time.monotonic()
        try:
            result = await self.client.generate(prompt.input_ids, params, rid, **dataset.config.extra_request_fields)
        except BadRequest as e:
            self._consecutive_failures = 0
            dataset.skipped(prompt.row, rid)
            writer.append_skip(prompt.row, e.skip_reason, e.message)
        except InvalidResponse as e:
            self._consecutive_failures = 0
            dataset.skipped(prompt.row, rid)
            writer.append_skip(prompt.row, "invalid_response", str(e))
        except RequestFailed as e:
            self._carry_out(dataset, dataset.failed(prompt.row, rid, str(e)))
        except Exception as e:  # anything unexpected: keep the row for the next run, say why
            log.exception("%s: request failed", names.sample_id(dataset.name, prompt.row))
            self._carry_out(dataset, dataset.failed(prompt.row, rid, f"{type(e).__name__}: {e}"))
        else:
            self._consecutive_failures = 0
            self._answer(dataset, prompt, rid, params, result, queued_s, time.monotonic() - started)

    def _answer(self, dataset: DatasetController, prompt: Prompt, rid: str, params: dict, result: GenerateResult,
                queued_s: float, e2e_s: float) -> None:
        actions = dataset.answered(prompt, rid, result, e2e_s, time.monotonic())
        self._carry_out(dataset, actions, keep=lambda keep: self._write(dataset, prompt, params, keep, queued_s, e2e_s))

    def _write(self, dataset: DatasetController, prompt: Prompt, params: dict, keep: Keep, queued_s: float,
               e2e_s: float) -> None:
        """Append the record of a kept response (`cut_at_budget` when the controller cut it)."""
        result = keep.result
        self.writers[dataset.name].append_record(GenerationRecord(
            sample_id=names.sample_id(dataset.name, prompt.row), dataset=dataset.name, row=prompt.row,
            input_ids=prompt.input_ids, output_ids=result.output_ids, finish_reason=result.finish_reason,
            prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
            prompt_class=prompt.prompt_class, sampling_params=params, rid=result.rid,
            timings=Timings(round(queued_s, 4), round(e2e_s, 4), time.time()),
            trace=prompt.response_ids is not None, source_id=prompt.source_id,
            cut=CutAtBudget(keep.generated, keep.estimated) if keep.generated is not None else None))
        self._carry_out(dataset, dataset.kept(result, keep.generated, e2e_s, time.monotonic()))

    # ---- carrying out ---------------------------------------------------------------------------

    def _carry_out(self, dataset: DatasetController, actions: list[Action],
                   keep: Callable[[Keep], None] | None = None) -> None:
        """Do what the controller decided, in its order. `keep` writes a record (only an answer has one)."""
        for action in actions:
            if self.on_action is not None:
                self.on_action(dataset.name, action)
            match action:
                case Keep():
                    keep(action)
                case Cut(rids):
                    # Not cancelled: the aborted calls answer with the partial responses, kept. An
                    # abort the server dropped is sent again (SGLangClient.abort_until_answered).
                    self._send_aborts(list(rids), until_answered=True)
                case Abort(rids):
                    self._cancel(rids)
                case Stop(rids):
                    cancelled = self._cancel(rids)
                    if cancelled:
                        log.info("%s: stopped at %d tokens, aborting %d in flight", dataset.name, dataset.tokens,
                                 len(cancelled))
                    self._notify()
                case Tick(after_s):
                    self._plan_tick(dataset, after_s)
                case LeaveForNextRun(row, reason):
                    self._transient_failure(f"{names.sample_id(dataset.name, row)}: {reason}")
                case StopCuttingAtBudget():
                    self._stop_cutting_at_budget("the server answers aborted requests without their output: "
                                                 "requests in flight at a budget are aborted instead, as "
                                                 "atBudget: abort")

    def _cancel(self, rids: tuple[str, ...]) -> list[str]:
        """Cancel the requests' Tasks and abort them at the server: the rids of those still running.
        Synchronous, so no completion can slip in between the decision and it."""
        running = [rid for rid in rids if not self._tasks[rid].done()]
        for rid in running:
            self._tasks[rid].cancel()
        if running:
            self._send_aborts(running)
        return running

    def _send_aborts(self, rids: list[str], until_answered: bool = False) -> None:
        abort = asyncio.create_task(self._abort(rids, until_answered))
        self._abort_tasks.add(abort)
        abort.add_done_callback(self._abort_tasks.discard)

    def _plan_tick(self, dataset: DatasetController, after_s: float | None) -> None:
        planned = self._ticks.pop(dataset.name, None)
        if planned is not None:
            planned.cancel()
        if after_s is not None:
            self._ticks[dataset.name] = asyncio.get_running_loop().call_later(max(after_s, 0.001), self._tick, dataset)

    def _tick(self, dataset: DatasetController) -> None:
        del self._ticks[dataset.name]
        self._carry_out(dataset, dataset.tick(time.monotonic()))
        self._notify()

    def _stop_cutting_at_budget(self, why: str) -> None:
        """Cutting at the budget is off for this process: the server refuses aborts, or answers most cut
        requests with an error instead of their output (dataset_controller.loses_cut_outputs). Said in
        the progress report, so on the object, when the spec asked to cut."""
        log.warning("cutting at the budget is off for this process: %s", why)
        notice = f"cutting at the budget is off: {why}"
        if self.config.at_budget == budget_shares.CUT and notice not in self.notices:
            self.notices.append(notice)
        for dataset in self.datasets:
            dataset.stop_cutting_at_budget()

    def _transient_failure(self, message: str) -> None:
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
            for dataset in self.datasets:
                self._carry_out(dataset, dataset.stop())
        else:
            log.info("the server is ready again: dispatch goes on")
            self._consecutive_failures = 0
        finally:
            self._reconnecting = None
            self._notify()

    async def _abort(self, rids: list[str], until_answered: bool = False) -> None:
        abort = self.client.abort_until_answered if until_answered else self.client.abort
        results = await asyncio.gather(*(abort(rid) for rid in rids), return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            # The server still aborts them when it notices the closed connections (~4 s).
            log.warning("%d of %d aborts failed: %r", len(failed), len(rids), failed[0])

    async def _abort_everything(self) -> None:
        for dataset in self.datasets:
            self._carry_out(dataset, dataset.stop())
        tasks = [self._tasks[r.rid] for d in self.datasets for r in d.requests.values()]
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _drain_aborts(self) -> None:
        if self._abort_tasks:
            await asyncio.gather(*list(self._abort_tasks), return_exceptions=True)

    # ---- progress -----------------------------------------------------------------------------

    def _refresh_coordination(self) -> None:
        stopped = self.coordinator.stopped_datasets()
        peers = self.coordinator.peers()
        now = time.monotonic()
        for dataset in self.datasets:
            self._carry_out(dataset, dataset.peers_reported(peers.get(dataset.name, {}), dataset.name in stopped, now))
        self._notify()

    def _publish(self, finished: bool = False) -> None:
        now = time.monotonic()
        for writer in self.writers.values():
            writer.sync()  # fsync before publishing: published totals are durable
        document = ProgressDocument(
            replica=self.config.replica, replicas=self.config.replicas, updated_at=time.time(), finished=finished,
            notices=self.notices, datasets={d.name: d.progress(self.writers[d.name].durable, now) for d in self.datasets})
        self.coordinator.publish(document)
        self.last_progress = document

    async def _publish_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.progress_interval_s)
            try:
                self._publish()
                self._refresh_coordination()
            except Exception as e:
                # One failed round (a full disk, a Kubernetes ApiException, a urllib3 timeout) must not
                # end progress publishing: the next interval tries again.
                log.warning("progress not published: %s: %s", type(e).__name__, e)
            now = time.monotonic()
            for dataset in self.datasets:
                mode = dataset.mode(now)
                if mode not in (BudgetMode.PENDING, BudgetMode.STOPPED):
                    p = dataset.progress(self.writers[dataset.name].durable, now)
                    log.info("%s: %d/%d tokens, %d samples, %.0f tok/s, %d in flight, %s", dataset.name,
                             dataset.tokens, dataset.budget_tokens, p.samples, p.tokens_per_second, p.in_flight,
                             mode.value)
