"""The generate engine against the in-process simulator: budgets, abort, skip on start, overlap,
bad requests, faults, coordination."""

import asyncio
import errno
import os

import pytest

from draftgen.fold import fold_reports
from draftgen_contracts import exit_codes
from draftgen_contracts.sglang_protocol import ServerNotReady
from draftgen_dev.builders import (ConfigBuilder, SpecBuilder, dataset_progress, generate_config, generation_record,
                                   progress)
from draftgen_dev.cluster.controlplane import free_port
from jobrunner.shared import output
from jobrunner.shared.coordination import FileCoordinator
from jobrunner.generate.run import run_generate
from tests.jobrunner.conftest import write_prompts

FAST_SIM = {"speedup": 200.0}  # simulated seconds per real second


def config(sim, tmp_path, tokenizer_path, datasets, **extra):
    return generate_config(sim.base_url, tmp_path / "out", tokenizer_path, datasets,
                           **{"startup_timeout_s": 10, "progress_interval_s": 0.2, **extra})


def records(tmp_path, dataset):
    return [r for p in output.record_files(tmp_path / "out", dataset) for r in output.iter_records(p)]


def assert_consistent(tmp_path, dataset):
    """Every record whole and unique, and the summary's totals equal to the sum over records."""
    recs = records(tmp_path, dataset)
    rows = [r["row"] for r in recs]
    assert len(rows) == len(set(rows))
    for r in recs:
        assert r["completion_tokens"] == len(r["output_ids"]) and r["finish_reason"] in ("stop", "length")
    s = output.read_summary(tmp_path / "out", dataset, 0)
    assert s.completion_tokens == sum(r["completion_tokens"] for r in recs)
    assert sorted(s.rows) == sorted(rows)
    return recs


async def test_budget_stops_dataset_aborts_in_flight_and_moves_on(simulator, tmp_path, tokenizer_path, prompts_file):
    sim = simulator(profile="chat", speedup=10.0)  # slow enough that requests are in flight
    cfg = config(sim, tmp_path, tokenizer_path, [
        {"name": "a", "path": prompts_file, "budget_tokens": 8000, "concurrency": 20},
        {"name": "b", "path": prompts_file, "budget_tokens": 4000},
    ], at_budget="abort")
    assert await run_generate(cfg) == exit_codes.OK
    for name, budget_tokens in (("a", 8000), ("b", 4000)):
        recs = assert_consistent(tmp_path, name)
        tokens = [r["completion_tokens"] for r in recs]
        # The record that met the budget is the last one kept: the rest in flight were aborted.
        assert sum(tokens) >= budget_tokens > sum(tokens[:-1])
        assert not any(r.get("cut_at_budget") for r in recs)
    assert sim.stats.aborted > 0
    report = FileCoordinator(tmp_path / "out" / "coordination", 0).all_progress()[0]
    assert report.finished and report.datasets["a"].state == "BudgetMet"
    assert report.datasets["a"].completion_tokens == sum(r["completion_tokens"] for r in records(tmp_path, "a"))


async def test_cut_at_the_budget_keeps_the_partial_responses_and_makes_it_exactly(simulator, tmp_path,
                                                                                 tokenizer_path, prompts_file):
    sim = simulator(profile="chat", speedup=10.0)
    cfg = config(sim, tmp_path, tokenizer_path, [
        {"name": "a", "path": prompts_file, "budget_tokens": 8000, "concurrency": 20},
        {"name": "b", "path": prompts_file, "budget_tokens": 4000},
    ])
    assert cfg.at_budget == "cut"  # the default
    assert await run_generate(cfg) == exit_codes.OK
    for name, budget_tokens in (("a", 8000), ("b", 4000)):
        recs = assert_consistent(tmp_path, name)
        assert sum(r["completion_tokens"] for r in recs) == budget_tokens
        cut = [r for r in recs if r.get("cut_at_budget")]
        # The requests in flight at the budget were cut: kept as truncated responses, each within its
        # limit, and counted apart in the summary.
        assert cut and all(r["finish_reason"] == "length" and 0 < r["completion_tokens"] <= 4096 for r in cut)
        # Each says what the server made for it, and what the decode clock said it had when cut.
        assert all(r["cut"]["generated"] >= r["completion_tokens"] for r in cut)
        assert any(r["cut"]["estimated"] is not None for r in cut)
        summary = output.read_summary(tmp_path / "out", name, 0)
        assert (summary.cut_records, summary.cut_tokens) == (len(cut), sum(r["completion_tokens"] for r in cut))
    assert sim.stats.aborted > 0
    # What the server made and nobody kept: the tokens past the cut, made between the decision and the
    # abort. That waste is the client's latency times the decode rate, so it grows when the machine is
    # loaded (12 % of the budget once under a full `make test`, 2 % alone); what cutting keeps instead of
    # aborting is the partial responses, most of a wave. Held as a ratio of the two: cutting keeps at
    # least four times what it wastes (about forty times on an idle machine).
    kept = sum(r["completion_tokens"] for name in ("a", "b") for r in records(tmp_path, name)
               if r.get("cut_at_budget"))
    assert 0 <= sim.stats.tokens_generated_total - 12_000 < kept / 4


async def test_a_server_that_answers_aborts_without_output_is_aborted_at_the_budget_instead(
        simulator, tmp_path, tokenizer_path, prompts_file):
    # Every cut answered 503, as SGLang answers a request it retracted without a KV backup: more than
    # that server's own aborts, so the process stops cutting.
    sim = simulator(profile="chat", speedup=10.0, abort_status=503)
    cfg = config(sim, tmp_path, tokenizer_path, [
        {"name": "a", "path": prompts_file, "budget_tokens": 8000, "concurrency": 20},
        {"name": "b", "path": prompts_file, "budget_tokens": 4000},
    ])
    assert await run_generate(cfg) == exit_codes.OK
    for name, budget_tokens in (("a", 8000), ("b", 4000)):
        recs = assert_consistent(tmp_path, name)
        assert sum(r["completion_tokens"] for r in recs) >= budget_tokens
        assert not any(r.get("cut_at_budget") for r in recs)


async def test_a_record_that_cannot_be_written_stops_the_replica_and_the_resume_loses_nothing(
        simulator, tmp_path, tokenizer_path, monkeypatch):
    """The 8th record's write fails half-way (a full volume): the file is cut back to the 7 before it,
    and the process stops, raising the error (the CLI exits VOLUME_FULL), rather than going on to
    generate answers it cannot keep, or counting a row it never wrote. The resume writes every row
    once."""
    sim = simulator(profile="chat", **FAST_SIM)
    prompts = write_prompts(tmp_path / "prompts.jsonl", 20)
    cfg = config(sim, tmp_path, tokenizer_path, [{"name": "a", "path": prompts, "budget_tokens": 10**6,
                                                  "concurrency": 1}])
    real, writes = output._write_line, []

    def full_at_the_eighth(fd, line):
        writes.append(line)
        if len(writes) == 8:
            os.write(fd, line[: len(line) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, line)
    monkeypatch.setattr(output, "_write_line", full_at_the_eighth)
    with pytest.raises(OSError) as stopped:
        await run_generate(cfg)
    assert stopped.value.errno == errno.ENOSPC and len(writes) == 8  # nothing generated after it
    assert len(assert_consistent(tmp_path, "a")) == 7
    monkeypatch.setattr(output, "_write_line", real)
    assert await run_generate(cfg) == exit_codes.OK
    assert sorted(r["row"] for r in assert_consistent(tmp_path, "a")) == list(range(20))


async def test_dataset_at_budget_is_skipped_on_restart(simulator, tmp_path, tokenizer_path, prompts_file):
    sim = simulator(**FAST_SIM, profile="fixed:100")
    datasets = [{"name": "a", "path": prompts_file, "budget_tokens": 1000}]
    assert await run_generate(config(sim, tmp_path, tokenizer_path, datasets)) == exit_codes.OK
    requests_before = sim.stats.requests
    assert await run_generate(config(sim, tmp_path, tokenizer_path, datasets)) == exit_codes.OK
    assert sim.stats.requests == requests_before


async def test_resume_after_raising_the_budget_never_repeats_a_row(simulator, tmp_path, tokenizer_path, prompts_file):
    sim = simulator(**FAST_SIM, profile="fixed:50")
    datasets = [{"name": "a", "path": prompts_file, "budget_tokens": 1000}]
    await run_generate(config(sim, tmp_path, tokenizer_path, datasets))
    first = len(records(tmp_path, "a"))
    datasets[0]["budget_tokens"] = 10**9
    await run_generate(config(sim, tmp_path, tokenizer_path, datasets))
    recs = assert_consistent(tmp_path, "a")
    assert first < len(recs) == 200


async def test_exhausted_dataset_overlaps_with_the_next(simulator, tmp_path, tokenizer_path):
    from tests.jobrunner.conftest import write_prompts

    # Every response takes 0.4 s (400 tokens at 100 tokens/s, 10x): a's last one is surely still in
    # flight when b starts, however loaded the machine (short chat responses at 200x made the check race).
    sim = simulator(profile="fixed:400", speedup=10.0)
    small = write_prompts(tmp_path / "small.jsonl", 30)
    cfg = config(sim, tmp_path, tokenizer_path, [
        {"name": "a", "path": small, "budget_tokens": 10**9},
        {"name": "b", "path": small, "budget_tokens": 10**9},
    ])
    assert await run_generate(cfg) == exit_codes.OK
    a, b = records(tmp_path, "a"), records(tmp_path, "b")
    assert len(a) == len(b) == 30
    # b started before a's last response came back: its first completion precedes a's last.
    assert min(r["timings"]["finished_at"] - r["timings"]["e2e_s"] for r in b) < max(r["timings"]["finished_at"] for r in a)
    assert FileCoordinator(tmp_path / "out" / "coordination", 0).all_progress()[0].datasets["a"].state == "Exhausted"


async def test_a_400_is_a_skipped_row_not_a_failure(simulator, tmp_path, tokenizer_path, prompts_file):
    # The config claims a longer context than the server has: every request is a 400 there.
    sim = simulator(**FAST_SIM, profile="fixed:10", context_len=64)
    cfg = config(sim, tmp_path, tokenizer_path, [{"name": "a", "path": prompts_file, "budget_tokens": 100,
                                                  "max_new_tokens": 100}], context={"length": 4096})
    assert await run_generate(cfg) == exit_codes.OK
    s = output.read_summary(tmp_path / "out", "a", 0)
    assert s.records == 0 and s.skipped_by_reason == {"http_400": 200}


async def test_prompts_too_long_for_the_context_are_skipped_or_clamped(simulator, tmp_path, tokenizer_path, prompts_file):
    sim = simulator(**FAST_SIM, profile="fixed:500", context_len=60)
    ds = [{"name": "a", "path": prompts_file, "budget_tokens": 10**9, "max_new_tokens": 50}]
    await run_generate(config(sim, tmp_path, tokenizer_path, ds, context={"policy": "skip"}))
    assert output.read_summary(tmp_path / "out", "a", 0).skipped_by_reason == {"prompt_too_long": 200}

    sim2 = simulator(**FAST_SIM, profile="fixed:500", context_len=60)
    ds[0]["name"] = "b"
    await run_generate(config(sim2, tmp_path, tokenizer_path, ds, context={"policy": "clamp", "min_room_tokens": 8}))
    recs = records(tmp_path, "b")
    assert len(recs) == 200
    # asked for context - prompt - 1; SGLang's scheduler stops one short (docs/sglang.md#context-length)
    assert all(r["finish_reason"] == "length" and r["prompt_tokens"] + r["completion_tokens"] == 58 for r in recs)


async def test_injected_faults_leave_every_sample_accounted_for(simulator, tmp_path, tokenizer_path, prompts_file):
    sim = simulator(**FAST_SIM, profile="fixed:20", faults={"http_500": 0.04, "http_503": 0.03, "reset": 0.03})
    cfg = config(sim, tmp_path, tokenizer_path, [{"name": "a", "path": prompts_file, "budget_tokens": 10**9}],
                 max_attempts=10)
    code = await run_generate(cfg)
    s = output.read_summary(tmp_path / "out", "a", 0)
    assert sum(sim.stats.faults.values()) > 0
    assert code == exit_codes.OK and s.records + s.skipped == 200
    assert_consistent(tmp_path, "a")


async def test_coordinator_stop_and_a_settled_peer(simulator, tmp_path, tokenizer_path, prompts_file):
    sim = simulator(**FAST_SIM, profile="fixed:100")
    coord_dir = tmp_path / "out" / "coordination"
    other = FileCoordinator(coord_dir, 1)
    other.publish(progress(1, replicas=2, b=dataset_progress(900, 9, settled=True, budget_tokens=1000)))
    other.declare_stopped({"a"})
    # "b" first: dataset 0 of the spec looks for its receiver at replica 0 (this one).
    cfg = config(sim, tmp_path, tokenizer_path, [
        {"name": "b", "path": prompts_file, "budget_tokens": 1000},
        {"name": "a", "path": prompts_file, "budget_tokens": 10**9},
    ], replicas=2)
    assert await run_generate(cfg) == exit_codes.OK
    assert records(tmp_path, "a") == []
    b = records(tmp_path, "b")
    assert all(r["row"] % 2 == 0 for r in b)  # replica 0 of 2
    # Replica 1 settled at 900: replica 0, the receiver, makes exactly the 100 left, in one response.
    assert len(b) == 1


async def test_sample_cap_is_never_overshot(simulator, tmp_path, tokenizer_path, prompts_file):
    sim = simulator(**FAST_SIM, profile="chat")
    cfg = config(sim, tmp_path, tokenizer_path, [{"name": "a", "path": prompts_file, "budget_tokens": 10**9,
                                                  "sample_cap": 17}])
    assert await run_generate(cfg) == exit_codes.OK
    assert len(records(tmp_path, "a")) == 17


async def test_next_dataset_starts_once_in_flight_covers_the_budget(simulator, tmp_path, tokenizer_path,
                                                                    prompts_file):
    # Every response is 100 tokens, 3 at a time: after 18 responses "a" sends the 2 that make up
    # the rest of its budget and holds its third slot; "b" starts then, before those 2 finish.
    sim = simulator(profile="fixed:100", speedup=10.0)
    cfg = config(sim, tmp_path, tokenizer_path, [
        {"name": "a", "path": prompts_file, "budget_tokens": 2000, "concurrency": 3},
        {"name": "b", "path": prompts_file, "budget_tokens": 300, "concurrency": 3},
    ])
    assert await run_generate(cfg) == exit_codes.OK
    a, b = assert_consistent(tmp_path, "a"), assert_consistent(tmp_path, "b")
    assert sum(r["completion_tokens"] for r in a) == 2000 and sum(r["completion_tokens"] for r in b) >= 300
    b_first_sent = min(r["timings"]["finished_at"] - r["timings"]["e2e_s"] for r in b)
    assert b_first_sent < max(r["timings"]["finished_at"] for r in a)


def write_part(root, dataset: str, replica: int, lengths: list[int]) -> output.OutputTotals:
    """A part as a replica of a deleted run left it: its records, durable."""
    writer = output.PartWriter(root, dataset, replica)
    for row, n in enumerate(lengths):
        writer.append_record(generation_record(dataset, row, [1, 2], [7] * n, "length" if n == 8 else "stop"))
    made = writer.sync(force=True)
    writer.close()
    return made


async def test_a_replica_reports_the_parts_on_disk_before_its_server_is_up(tmp_path, tokenizer_path, prompts_file):
    """A run created again over its data: the first fold must count every part already made, though
    the replica that made one has not reported yet and this one's server is still loading."""
    made = write_part(tmp_path / "out", "a", 1, [5, 8, 3])
    spec = SpecBuilder().replicas(2).dataset("a", budget=3000).spec()
    loading = (ConfigBuilder(f"http://127.0.0.1:{free_port()}", tmp_path / "out", tokenizer_path)
               .change_spec(lambda s: s.replicas(2)).dataset("a", prompts_file, 3000).config(startup_timeout_s=1))
    with pytest.raises(ServerNotReady):
        await run_generate(loading)
    reports = FileCoordinator(tmp_path / "out" / "coordination", 0).all_progress()
    assert list(reports) == [0] and reports[0].datasets["a"].elsewhere == {1: made.counts()}
    [folded] = fold_reports(spec, reports, [], "t")
    assert (folded.tokens, folded.samples, folded.truncated) == (16, 3, 1)


async def until(predicate, timeout_s: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_a_server_lost_mid_run_is_waited_for_and_the_run_goes_on_in_the_same_process(
        simulator, tmp_path, tokenizer_path, prompts_file, caplog):
    # As a pod's SGLang sidecar restarts in place: the server goes away mid-run and comes back on its
    # port. The process waits for it instead of exiting (a new pod would load the model again).
    sim = simulator(profile="chat", speedup=10.0)
    port = int(sim.base_url.rsplit(":", 1)[1])
    cfg = config(sim, tmp_path, tokenizer_path, [{"name": "a", "path": prompts_file, "budget_tokens": 6000,
                                                  "concurrency": 8}], max_attempts=1, startup_timeout_s=30)
    generate = asyncio.create_task(run_generate(cfg))
    await until(lambda: len(records(tmp_path, "a")) >= 3, 30, "the first samples")
    await asyncio.to_thread(sim.stop)
    await asyncio.sleep(1.0)  # every request in flight failed, and those sent after them
    assert not generate.done()
    simulator(profile="chat", speedup=10.0, port=port)
    assert await asyncio.wait_for(generate, 60) == exit_codes.OK
    assert "the server stopped answering" in caplog.text
    recs = assert_consistent(tmp_path, "a")
    assert sum(r["completion_tokens"] for r in recs) == 6000


async def test_a_server_that_does_not_come_back_ends_the_run_for_a_retry_not_as_a_failure(
        simulator, tmp_path, tokenizer_path, prompts_file):
    sim = simulator(profile="chat", speedup=10.0)
    cfg = config(sim, tmp_path, tokenizer_path, [{"name": "a", "path": prompts_file, "budget_tokens": 6000,
                                                  "concurrency": 8}], max_attempts=1, startup_timeout_s=1)
    generate = asyncio.create_task(run_generate(cfg))
    await until(lambda: len(records(tmp_path, "a")) >= 3, 30, "the first samples")
    await asyncio.to_thread(sim.stop)
    assert await asyncio.wait_for(generate, 30) == exit_codes.RETRY_LATER  # the Job runs it again: it resumes
    recs = assert_consistent(tmp_path, "a")
    assert 0 < sum(r["completion_tokens"] for r in recs) < 6000
