"""Status folding: every replica's report -> one status entry per dataset. Pure; the operator alone
writes its result, and the local runner shows the same numbers.

A report is the progress document a generate process publishes (jobrunner.coordination).
"""

from __future__ import annotations

from jobrunner import budget

from .api import DatasetGenerationSpec, DatasetStatus, ReplicaStatus


def fold_reports(spec: DatasetGenerationSpec, reports: dict[int, dict], previous: list[DatasetStatus],
                 now: str, generation_jobs_finished: bool = False) -> list[DatasetStatus]:
    """Per dataset: totals over the spec's replicas, and the state the shared budget gives them.

    `generation_jobs_finished`: every generation Job of the current config succeeded, so a dataset
    short of its budget has no prompts left even where a replica's last report predates its exit.
    """
    replicas = [reports[r] for r in range(spec.server.replicas) if r in reports]
    before = {d.name: d for d in previous}
    folded = []
    for dataset in spec.datasets:
        entries = [r["datasets"][dataset.name] for r in replicas if dataset.name in r.get("datasets", {})]
        tokens = sum(e.get("completion_tokens", 0) for e in entries)
        samples = sum(e.get("samples", 0) for e in entries)
        old = before.get(dataset.name)
        # Exhausted stays exhausted until the budget changes: the generation Jobs that proved it are
        # deleted next, and their absence must not make the dataset look open again.
        exhausted = generation_jobs_finished or (
            len(entries) == spec.server.replicas and all(e.get("state") == "Exhausted" for e in entries)) or (
            old is not None and old.state == "Exhausted" and old.budget_tokens == dataset.budget_tokens)
        state = budget.dataset_state(
            dataset.budget_tokens, tokens, dataset.sample_cap, samples,
            started=any(e.get("state", "Pending") != "Pending" for e in entries),
            exhausted=exhausted, failed=any(e.get("state") == "Failed" for e in entries))
        changed = old is None or (old.tokens, old.samples, old.state) != (tokens, samples, state)
        folded.append(DatasetStatus(
            name=dataset.name, budget_tokens=dataset.budget_tokens, tokens=tokens, samples=samples, state=state,
            truncated=sum(e.get("truncated", 0) for e in entries), skipped=sum(e.get("skipped", 0) for e in entries),
            tokens_per_second=round(sum(e.get("tokens_per_second", 0.0) for e in entries), 1)
            if state == "Generating" else 0.0,
            last_update=now if changed else old.last_update))
    return folded


def fold_replicas(spec: DatasetGenerationSpec, reports: dict[int, dict]) -> list[ReplicaStatus]:
    """Which report of each replica the totals include: a replica subtracts its own tokens as of that
    report from a dataset's total to learn what the others have (jobrunner.coordination_kube)."""
    return [ReplicaStatus(index=r, report_time=reports[r].get("updated_at"), finished=bool(reports[r].get("finished")))
            for r in range(spec.server.replicas) if r in reports]


def is_generation_done(datasets: list[DatasetStatus]) -> bool:
    """Every dataset met its budget (or cap) or ran out of prompts: the GPUs can go."""
    return bool(datasets) and all(d.state in ("BudgetMet", "Exhausted") for d in datasets)


def progress_text(datasets: list[DatasetStatus]) -> str:
    """Percent of the summed budgets, counting no dataset past its own budget; 'done' datasets count whole."""
    total = sum(d.budget_tokens for d in datasets)
    if not total:
        return ""
    kept = sum(d.budget_tokens if d.state in ("BudgetMet", "Exhausted") else min(d.tokens, d.budget_tokens)
               for d in datasets)
    return f"{100.0 * kept / total:.1f}%"
