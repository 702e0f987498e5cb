"""Two generate processes sharing budgets through the file coordination, each against its own
simulator: the edges of docs/budgets.md that need more than one replica."""

import asyncio
import json

import pytest

from draftgen_contracts import exit_codes
from draftgen_contracts.budget_shares import static_share
from jobrunner.shared import output
from jobrunner.shared.coordination import FileCoordinator
from jobrunner.generate.run import run_generate
from tests.jobrunner.test_generate import config

MAX_NEW = 300


def kept(tmp_path, dataset: str, replica: int) -> int:
    summary = output.read_summary(tmp_path / "out", dataset, replica)
    return summary.completion_tokens if summary else 0


def rows_written(tmp_path, dataset: str) -> list[int]:
    return [r["row"] for p in output.record_files(tmp_path / "out", dataset) for r in output.iter_records(p)]


async def run_replicas(sims, tmp_path, tokenizer_path, datasets, **extra) -> list[int]:
    cfgs = [config(sim, tmp_path, tokenizer_path, datasets, replicas=len(sims), replica=r, **extra)
            for r, sim in enumerate(sims)]
    return await asyncio.gather(*(run_generate(c) for c in cfgs))


def assert_met_within_bound(tmp_path, dataset: str, budget: int, replicas: int, at_budget: str = "cut") -> int:
    """The budget met (exactly when cutting; aborting, less than one response per replica over it),
    no row twice."""
    total = sum(kept(tmp_path, dataset, r) for r in range(replicas))
    if at_budget == "cut":
        assert total == budget, (dataset, total)
    assert budget <= total < budget + replicas * MAX_NEW, (dataset, total)
    rows = rows_written(tmp_path, dataset)
    assert len(rows) == len(set(rows))
    return total


@pytest.mark.parametrize("at_budget", ["cut", "abort"])
async def test_replicas_ten_times_apart_in_speed_each_make_their_own_share(simulator, tmp_path, tokenizer_path,
                                                                           prompts_file, at_budget):
    fast = simulator(profile="chat", speedup=100.0)
    slow = simulator(profile="chat", speedup=10.0)
    budget = 8000
    datasets = [{"name": "a", "path": prompts_file, "budget_tokens": budget, "max_new_tokens": MAX_NEW,
                 "concurrency": 8}]
    # Replica 0, the fast one, is the dataset's receiver: it waits for the slow one to settle.
    codes = await run_replicas([fast, slow], tmp_path, tokenizer_path, datasets, at_budget=at_budget)
    assert codes == [exit_codes.OK] * 2
    assert_met_within_bound(tmp_path, "a", budget, 2, at_budget)
    share = static_share(budget, 2, 1)
    if at_budget == "cut":  # the slow replica made its share exactly, cutting what was in flight
        assert kept(tmp_path, "a", 1) == share
        return
    # The slow replica was not outrun: it made its share, less what it left to the receiver
    # (under one response and its margin), never more than its share and one response.
    assert share - 2 * MAX_NEW <= kept(tmp_path, "a", 1) < share + MAX_NEW


@pytest.mark.parametrize("at_budget", ["cut", "abort"])
async def test_rows_running_out_on_one_replica_leave_its_share_to_another(simulator, tmp_path, tokenizer_path,
                                                                          at_budget):
    # Pretokenized rows: the odd ones (replica 1's) are too long for the context and skipped, so
    # replica 1 runs out at once, although it is where dataset 1 looks for its receiver first.
    path = tmp_path / "uneven.jsonl"
    with open(path, "w") as f:
        for i in range(300):
            f.write(json.dumps({"input_ids": [5] * (10 if i % 2 == 0 else 500)}) + "\n")
    sims = [simulator(profile="chat", speedup=100.0, context_len=400) for _ in range(2)]
    budget = 3000
    datasets = [{"name": "first", "path": str(path), "pretokenized": True, "budget_tokens": 500,
                 "max_new_tokens": MAX_NEW},
                {"name": "second", "path": str(path), "pretokenized": True, "budget_tokens": budget,
                 "max_new_tokens": MAX_NEW}]
    codes = await run_replicas(sims, tmp_path, tokenizer_path, datasets, context={"policy": "skip", "length": 400},
                               at_budget=at_budget)
    assert codes == [exit_codes.OK] * 2
    assert_met_within_bound(tmp_path, "second", budget, 2, at_budget)
    assert kept(tmp_path, "second", 1) == 0 and kept(tmp_path, "second", 0) >= budget
    reports = FileCoordinator(tmp_path / "out" / "coordination", 0).all_progress()
    assert reports[1].datasets["second"].state == "Exhausted"
    assert reports[0].datasets["second"].state == "BudgetMet"


async def test_a_budget_lowered_below_what_was_made_ends_at_once(simulator, tmp_path, tokenizer_path, prompts_file):
    sims = [simulator(profile="chat", speedup=100.0) for _ in range(2)]
    datasets = [{"name": "a", "path": prompts_file, "budget_tokens": 4000, "max_new_tokens": MAX_NEW}]
    await run_replicas(sims, tmp_path, tokenizer_path, datasets)
    made = sum(kept(tmp_path, "a", r) for r in range(2))
    requests = [s.stats.requests for s in sims]
    datasets[0]["budget_tokens"] = 1000
    assert await run_replicas(sims, tmp_path, tokenizer_path, datasets) == [exit_codes.OK] * 2
    assert [s.stats.requests for s in sims] == requests  # nothing sent
    assert sum(kept(tmp_path, "a", r) for r in range(2)) == made
    for report in FileCoordinator(tmp_path / "out" / "coordination", 0).all_progress().values():
        assert report.datasets["a"].state == "BudgetMet" and report.datasets["a"].budget_tokens == 1000
