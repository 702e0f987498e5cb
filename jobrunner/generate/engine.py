"""The generation engine: the I/O of one generate process. It carries out what the scheduler
(jobrunner.generate.scheduler) orders: rows read and tokenized, requests sent and aborted through the
client, their Tasks, the records written, the ticks the budgets plan, progress published. It tells
the scheduler what happened and decides nothing: one dispatch loop asks it what to send each time a
prompt is read, a slot is freed, an answer comes, a tick is due or the peers report, the way a
serving engine runs what its scheduler decided (the package's docstring tells the whole flow)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
import uuid
from collections.abc import Callable

import aiohttp

from draftgen_contracts import budget_shares, names
from draftgen_contracts.generation_record import CutAtBudget, GenerationRecord, Timings
from draftgen_contracts.progress import ProgressDocument
from draftgen_contracts.sglang_protocol import BadRequest, GenerateResult, InvalidResponse, RequestFailed, SGLangError
from jobrunner.shared.config import DatasetConfig, GenerateConfig
from jobrunner.shared.coordination import Coordinator
from jobrunner.shared.dataset_files import record_file_set
from jobrunner.shared.datasets import read_rows
from jobrunner.generate import provenance
from jobrunner.generate.actions import (Abort, Action, Cut, Keep, LeaveForNextRun, Order, Send, StartReading, Stop,
                                        StopCuttingAtBudget, Tick, WaitForServer)
from jobrunner.generate.dataset_budget import BudgetMode, DatasetBudget
from jobrunner.generate.decode_clock import DecodeClock
from jobrunner.generate.end_tokens import model_end_ids
from jobrunner.generate.feed import prepared_prompts
from jobrunner.generate.scheduler import Scheduler
from jobrunner.shared.output import PartWriter, dataset_dir, other_parts
from jobrunner.shared.prompts import Prompt, PromptPreparer
from jobrunner.sglang.client import SGLangClient

log = logging.getLogger("jobrunner.generate")

# What an engine's `on_action` sees: the dataset's name ("" for the process) and an action, before
# it is carried out.
ActionHook = Callable[[str, Action], None]


def sampling_params_for(dataset: DatasetConfig, max_new_tokens: int) -> dict:
    return {**dataset.sampling_params, "max_new_tokens": max_new_tokens}


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
        self.scheduler: Scheduler | None = None  # made with the datasets' budgets (_open_datasets)
        self.writers: dict[str, PartWriter] = {}
        self.last_progress: ProgressDocument | None = None  # the last report published (read by the metrics)
        self._tasks: dict[str, asyncio.Task] = {}  # by rid: every request whose Task has not finished
        self._readers: list[asyncio.Task] = []  # one per dataset whose turn came: its rows read
        self._ticks: dict[str, asyncio.TimerHandle] = {}  # by dataset: the tick its budget planned
        self._wake = asyncio.Event()  # something changed: the dispatch loop asks the scheduler again
        self._room = asyncio.Event()  # the scheduler took prompts: the readers may offer more
        self._failure: BaseException | None = None  # what ends the run (a reader's or a request's error)
        self.notices: list[str] = []  # what this process does otherwise than the spec says (ProgressDocument)
        self._reconnecting: asyncio.Task | None = None  # waiting for a lost server to be ready again
        self._abort_tasks: set[asyncio.Task] = set()
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tokenize")
        # The coordinator's calls (the Kubernetes API: up to a 10 s time-out each) run on a thread of
        # their own, one at a time and in order, so that cuts and aborts never wait for the API server
        # and no report can land after a later one.
        self._coordination = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="coordination")

    def _notify(self) -> None:
        self._wake.set()

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
        try:
            await self._dispatch_loop()
        finally:
            await self._wind_down(publisher)
        if self.scheduler.lost:
            log.error("the server is lost: %s; run again to resume", self.scheduler.lost)
        return self.scheduler.exit_status()

    async def _dispatch_loop(self) -> None:
        """The one place requests are sent: what the scheduler orders, each time something changed."""
        while True:
            self._wake.clear()
            self._carry_out(self.scheduler.schedule(time.monotonic()))
            if self.scheduler.wants_rows():
                self._room.set()
            if self._failure is not None:
                raise self._failure
            if self.scheduler.is_over():
                return
            await self._wake.wait()

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
        self.scheduler.context_length = self.context_length

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
        budgets = []
        for index, d in enumerate(cfg.datasets):
            writer = self.writers[d.name] = PartWriter(cfg.output_root, d.name, cfg.replica)
            elsewhere = other_parts(cfg.output_root, d.name, cfg.replica, cfg.replicas)
            before = previous.datasets.get(d.name) if previous else None
            budgets.append(DatasetBudget.for_dataset(cfg, index, writer.totals, clock, before, elsewhere,
                                                     self.end_ids))
        self.scheduler = Scheduler(budgets, self.classes, clock, self.run_key, self.context_length)
        self._refresh_coordination()

    async def _wind_down(self, publisher: asyncio.Task) -> None:
        """However the run ends: readers cancelled, in-flight requests aborted when it stopped early,
        the last progress published, the part files closed."""
        for reader in self._readers:
            reader.cancel()
        for tick in self._ticks.values():
            tick.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)
        if self.scheduler.shutting_down or self.scheduler.lost:  # every dataset stopped: their Tasks end
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)
        await self._drain_aborts()
        publisher.cancel()
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        await asyncio.gather(publisher, *filter(None, [self._reconnecting]), return_exceptions=True)
        self._executor.shutdown(wait=False, cancel_futures=True)
        await self._publish_aside(finished=True)  # after any report still being sent: it is the last
        self._coordination.shutdown(wait=False)
        for writer in self.writers.values():
            writer.close()

    def request_shutdown(self) -> None:
        """SIGTERM: stop dispatching; the run then aborts what is in flight and returns."""
        if self.scheduler is not None:
            self._carry_out(self.scheduler.shut_down())
        self._notify()

    # ---- reading rows ---------------------------------------------------------------------------

    def _start_reading(self, name: str) -> None:
        reader = asyncio.create_task(self._read(name))
        reader.add_done_callback(self._reader_done)
        self._readers.append(reader)

    def _reader_done(self, reader: asyncio.Task) -> None:
        if not reader.cancelled() and reader.exception() is not None:
            self._fail(reader.exception())  # a dataset whose rows cannot be read fails the run
        self._notify()

    def _fail(self, error: BaseException) -> None:
        """End the run with `error` (the first one): every dataset stops and what is in flight is
        aborted, then the dispatch loop raises it (a full volume: exit VOLUME_FULL, else a failed pod
        that its Job retries). Going on would generate answers that cannot be kept."""
        if self._failure is None:
            self._failure = error
            if self.scheduler is not None:
                self._carry_out(self.scheduler.shut_down())
        self._notify()

    async def _read(self, name: str) -> None:
        """The dataset's rows, read and tokenized a chunk ahead, offered to the scheduler as it takes
        them; rows that cannot be prompts are recorded as skipped here."""
        d = self.scheduler.budget(name).config
        preparer = PromptPreparer(
            tokenizer=self.tokenizer, template_kwargs=self.config.template_kwargs_for(d),
            classes=list(self.classes.values()), context_length=self.context_length,
            policy=self.config.context.policy, min_room=self.config.context.min_room_tokens,
            class_override=d.prompt_class, max_new_tokens_override=d.max_new_tokens,
        )
        rows = read_rows(d.path, d.format, pretokenized=d.pretokenized, traces=d.kind == "traces",
                         replica=self.config.replica, replicas=self.config.replicas, fields=d.fields)
        writer = self.writers[name]
        prompts = prepared_prompts(rows, preparer.prepare, writer.is_done, self._executor)
        try:
            async for item in prompts:
                if not isinstance(item, Prompt):
                    writer.append_skip(item.row, item.reason, item.detail)
                    continue
                while (room := self.scheduler.room_for_rows(name)) == 0:
                    self._room.clear()
                    await self._room.wait()
                if room is None:
                    return
                self.scheduler.offer(name, item, time.monotonic())
                self._notify()
            self.scheduler.rows_read(name)
        finally:
            await prompts.aclose()

    # ---- requests -------------------------------------------------------------------------------

    def _send(self, name: str, send: Send) -> None:
        prompt, rid = send.prompt, send.rid
        work = self._replay(name, prompt, rid, send.queued_s) if prompt.response_ids is not None else \
            self._request(name, prompt, rid, send.max_new_tokens, send.queued_s)
        task = self._tasks[rid] = asyncio.create_task(work, name=rid)
        # A done callback, not a `finally`: a Task cancelled before its first step never enters
        # its body, but its callbacks always run.
        task.add_done_callback(lambda t: self._finished(name, prompt, rid, t))

    def _finished(self, name: str, prompt: Prompt, rid: str, task: asyncio.Task) -> None:
        del self._tasks[rid]
        if not task.cancelled() and task.exception() is not None:
            self._fail(task.exception())  # a record that could not be written: nothing later can be kept
        self._carry_out(self.scheduler.finished(name, prompt, rid, time.monotonic()))
        self._notify()

    async def _replay(self, name: str, prompt: Prompt, rid: str, queued_s: float) -> None:
        """An existing trace (kind `traces`): its response kept as it is, the server never asked. It
        goes through the same budget, record and resume path as a generated response."""
        result = GenerateResult(prompt.response_ids, prompt.finish_reason, len(prompt.input_ids),
                                len(prompt.response_ids), rid)
        self._answer(name, prompt, rid, {}, result, queued_s, 0.0)

    async def _request(self, name: str, prompt: Prompt, rid: str, max_new_tokens: int,
                       queued_s: float) -> None:
        config = self.scheduler.budget(name).config
        params = sampling_params_for(config, max_new_tokens)
        writer = self.writers[name]
        started = time.monotonic()
        try:
            result = await self.client.generate(prompt.input_ids, params, rid, **config.extra_request_fields)
        except BadRequest as e:
            self.scheduler.skipped(name, prompt.row, rid)
            writer.append_skip(prompt.row, e.skip_reason, e.message)
        except InvalidResponse as e:
            self.scheduler.skipped(name, prompt.row, rid)
            writer.append_skip(prompt.row, "invalid_response", str(e))
        except RequestFailed as e:
            self._carry_out(self.scheduler.failed(name, prompt.row, rid, str(e), time.monotonic()))
        except Exception as e:  # anything unexpected: keep the row for the next run, say why
            log.exception("%s: request failed", names.sample_id(name, prompt.row))
            self._carry_out(self.scheduler.failed(name, prompt.row, rid, f"{type(e).__name__}: {e}",
                                                   time.monotonic()))
        else:
            self._answer(name, prompt, rid, params, result, queued_s, time.monotonic() - started)

    def _answer(self, name: str, prompt: Prompt, rid: str, params: dict, result: GenerateResult,
                queued_s: float, e2e_s: float) -> None:
        orders = self.scheduler.answered(name, prompt, rid, result, e2e_s, time.monotonic())
        self._carry_out(orders, keep=lambda keep: self._write(name, prompt, params, keep, queued_s, e2e_s))

    def _write(self, name: str, prompt: Prompt, params: dict, keep: Keep, queued_s: float,
               e2e_s: float) -> None:
        """Append the record of a kept response (`cut_at_budget` when its budget cut it)."""
        result = keep.result
        self.writers[name].append_record(GenerationRecord(
            sample_id=names.sample_id(name, prompt.row), dataset=name, row=prompt.row,
            input_ids=prompt.input_ids, output_ids=result.output_ids, finish_reason=result.finish_reason,
            prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
            prompt_class=prompt.prompt_class, sampling_params=params, rid=result.rid,
            timings=Timings(round(queued_s, 4), round(e2e_s, 4), time.time()),
            trace=prompt.response_ids is not None, source_id=prompt.source_id,
            cut=CutAtBudget(keep.generated, keep.estimated) if keep.generated is not None else None))
        self._carry_out(self.scheduler.kept(name, result, keep.generated, e2e_s, time.monotonic()))

    # ---- carrying out ---------------------------------------------------------------------------

    def _carry_out(self, orders: list[Order], keep: Callable[[Keep], None] | None = None) -> None:
        """Do what the scheduler ordered, in its order. `keep` writes a record (only an answer has one)."""
        for name, action in orders:
            if self.on_action is not None:
                self.on_action(name, action)
            match action:
                case StartReading():
                    self._start_reading(name)
                case Send():
                    self._send(name, action)
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
                        log.info("%s: stopped at %d tokens, aborting %d in flight", name,
                                 self.scheduler.budget(name).tokens, len(cancelled))
                case Tick(after_s):
                    self._plan_tick(name, after_s)
                case LeaveForNextRun(row, reason):
                    log.warning("%s: %s (left for the next run)", names.sample_id(name, row), reason)
                case StopCuttingAtBudget():
                    self._stop_cutting_at_budget("the server answers aborted requests without their output: "
                                                 "requests in flight at a budget are aborted instead, as "
                                                 "atBudget: abort")
                case WaitForServer(reason):
                    self._reconnecting = asyncio.create_task(self._reconnect(reason))

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

    def _plan_tick(self, name: str, after_s: float | None) -> None:
        planned = self._ticks.pop(name, None)
        if planned is not None:
            planned.cancel()
        if after_s is not None:
            self._ticks[name] = asyncio.get_running_loop().call_later(max(after_s, 0.001), self._tick, name)

    def _tick(self, name: str) -> None:
        del self._ticks[name]
        self._carry_out(self.scheduler.tick(name, time.monotonic()))
        self._notify()

    def _stop_cutting_at_budget(self, why: str) -> None:
        """Cutting at the budget is off for this process: the server refuses aborts, or answers most cut
        requests with an error instead of their output (dataset_budget.loses_cut_outputs). Said in
        the progress report, so on the object, when the spec asked to cut."""
        log.warning("cutting at the budget is off for this process: %s", why)
        notice = f"cutting at the budget is off: {why}"
        if self.config.at_budget == budget_shares.CUT and notice not in self.notices:
            self.notices.append(notice)
        self.scheduler.stop_cutting_at_budget()

    async def _reconnect(self, reason: str) -> None:
        """The server stopped answering: no dispatch until it is ready again, as long as a start
        may take (`startup_timeout_s`). Waiting beats exiting: in a pod the server restarts in
        place, and a new pod would load the model once more. Given up, every dataset stops."""
        log.warning("the server stopped answering (%s): waiting up to %.0fs for it to be ready again",
                    reason, self.config.startup_timeout_s)
        try:
            await self.client.wait_ready(self.config.startup_timeout_s)
        except SGLangError as e:
            self._carry_out(self.scheduler.server_lost(f"{reason}; then {e}"))
        else:
            log.info("the server is ready again: dispatch goes on")
            self.scheduler.server_back()
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

    async def _drain_aborts(self) -> None:
        if self._abort_tasks:
            await asyncio.gather(*list(self._abort_tasks), return_exceptions=True)

    # ---- progress -----------------------------------------------------------------------------

    def _read_coordination(self) -> tuple[set[str], dict]:
        return self.coordinator.stopped_datasets(), self.coordinator.peers()

    def _refresh_coordination(self, read: tuple[set[str], dict] | None = None) -> None:
        stopped, peers = read or self._read_coordination()
        self._carry_out(self.scheduler.peers_reported(peers, stopped, time.monotonic()))
        self._notify()

    async def _refresh_aside(self) -> None:
        read = await asyncio.get_running_loop().run_in_executor(self._coordination, self._read_coordination)
        self._refresh_coordination(read)

    def _progress(self, finished: bool = False) -> ProgressDocument:
        now = time.monotonic()
        for writer in self.writers.values():
            writer.sync()  # fsync before publishing: published totals are durable
        return ProgressDocument(
            replica=self.config.replica, replicas=self.config.replicas, updated_at=time.time(), finished=finished,
            notices=self.notices,
            datasets={name: self.scheduler.progress(name, writer.durable, now) for name, writer in self.writers.items()})

    def _publish(self) -> None:
        """At the start, before anything is in flight."""
        document = self._progress()
        self.coordinator.publish(document)
        self.last_progress = document

    async def _publish_aside(self, finished: bool = False) -> None:
        document = self._progress(finished)
        await asyncio.get_running_loop().run_in_executor(self._coordination, self.coordinator.publish, document)
        self.last_progress = document

    async def _publish_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.progress_interval_s)
            # One failed round (a full disk, a Kubernetes ApiException, a urllib3 timeout) must not end
            # progress publishing, nor keep the peers' news from this replica: each is tried again.
            try:
                await self._publish_aside()
            except Exception as e:
                log.warning("progress not published: %s: %s", type(e).__name__, e)
            try:
                await self._refresh_aside()
            except Exception as e:
                log.warning("the peers' progress not read: %s: %s", type(e).__name__, e)
            now = time.monotonic()
            for name, writer in self.writers.items():
                budget = self.scheduler.budget(name)
                if budget.mode not in (BudgetMode.PENDING, BudgetMode.STOPPED):
                    p = self.scheduler.progress(name, writer.durable, now)
                    log.info("%s: %d/%d tokens, %d samples, %.0f tok/s, %d in flight, %s", name, budget.tokens,
                             budget.budget_tokens, p.samples, p.tokens_per_second, p.in_flight, budget.mode.value)
