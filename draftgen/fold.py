"""Status folding: every replica's report -> one status entry per dataset. Pure; the operator alone
writes its result, and the local runner shows the same numbers.

A report is the progress document a generate process publishes (draftgen_contracts.progress).
"""

from __future__ import annotations

from draftgen_contracts import budget
from draftgen_contracts.progress import DurableCounts, ProgressDocument
from draftgen_contracts.replica_status import ReplicaStatus
from draftgen_contracts.states import DATASET_DONE, DatasetState

from .api import DatasetGenerationSpec, DatasetStatus


def fold_reports(spec: DatasetGenerationSpec, reports: dict[int, ProgressDocument], previous: list[DatasetStatus],
                 now: str, generation_jobs_finished: bool = False) -> list[DatasetStatus]:
    """Per dataset: totals over the spec's replicas, and the state the shared budget gives them.

    `generation_jobs_finished`: every generation Job of the current config succeeded, so a dataset
    short of its budget has no prompts left even where a replica's last report predates its exit.
    """
    replicas = [reports[r] for r in range(spec.server.replicas) if r in reports]
    before = {d.name: d for d in previous}
    folded = []
    for dataset in spec.datasets:
        entries = [r.datasets[dataset.name] for r in replicas if dataset.name in r.datasets]
        counted = entries + unreported_parts(spec.server.replicas, reports, dataset.name)
        tokens = sum(e.completion_tokens for e in counted) if counted else None
        samples = sum(e.samples for e in counted) if counted else None
        old = before.get(dataset.name)
        # Exhausted stays exhausted until the budget changes: the generation Jobs that proved it are
        # deleted next, and their absence must not make the dataset look open again.
        exhausted = generation_jobs_finished or (
            len(entries) == spec.server.replicas and all(e.state == DatasetState.EXHAUSTED for e in entries)) or (
            old is not None and old.state == DatasetState.EXHAUSTED and old.budget_tokens == dataset.budget_tokens)
        state = budget.dataset_state(
            dataset.budget_tokens, tokens or 0, dataset.sample_cap, samples or 0,
            started=any(e.state != DatasetState.PENDING for e in entries),
            exhausted=exhausted, failed=any(e.state == DatasetState.FAILED for e in entries))
        cut, cut_tokens = sum(e.cut for e in counted), sum(e.cut_tokens for e in counted)
        changed = old is None or (old.tokens, old.samples, old.state) != (tokens, samples, state)
        folded.append(DatasetStatus(
            name=dataset.name, budget_tokens=dataset.budget_tokens, tokens=tokens, samples=samples, state=state,
            truncated=sum(e.truncated for e in counted), cut=cut, cut_tokens=cut_tokens,
            cut_samples_percent=percent(cut, samples), cut_tokens_percent=percent(cut_tokens, tokens),
            skipped=sum(e.skipped for e in counted),
            tokens_per_second=round(sum(e.tokens_per_second for e in entries), 1)
            if state == DatasetState.GENERATING else 0.0,
            last_update=now if changed else old.last_update))
    return folded


def percent(part: int, whole: int | None) -> float:
    return round(100 * part / whole, 1) if whole else 0.0


def unreported_parts(replicas: int, reports: dict[int, ProgressDocument], dataset: str) -> list[DurableCounts]:
    """For each replica with no report of `dataset` yet, its part as the others found it on disk.

    Without them a fold that has one replica's report of two counts the other as zero: a run
    deleted at 8,932 tokens and created again first said 6,088, though every one of those tokens
    was on disk. The replicas that did report read it there when they started; the largest view
    is the latest."""
    views: dict[int, DurableCounts] = {}
    for report in (reports[r] for r in range(replicas) if r in reports):
        entry = report.datasets.get(dataset)
        for index, counts in (entry.elsewhere if entry else {}).items():
            if index < replicas and (index not in views or counts.completion_tokens > views[index].completion_tokens):
                views[index] = counts
    return [counts for index, counts in sorted(views.items())
            if index not in reports or dataset not in reports[index].datasets]


def fold_replicas(spec: DatasetGenerationSpec, reports: dict[int, ProgressDocument],
                  nodes: dict[int, list[str]] | None = None,
                  group_restarts: dict[int, int] | None = None) -> list[ReplicaStatus]:
    """Each replica's last report, per dataset of the spec (the replicas read one another's parts here
    to share the budgets: jobrunner.shared.coordination_kube), its nodes and its group's restarts: every
    replica that has any of them."""
    datasets, nodes, group_restarts = [d.name for d in spec.datasets], nodes or {}, group_restarts or {}
    return [ReplicaStatus.of(r, reports.get(r), datasets, nodes.get(r), group_restarts.get(r, 0))
            for r in range(spec.server.replicas) if r in reports or nodes.get(r) or group_restarts.get(r)]


def reported_tokens(datasets: list[DatasetStatus]) -> int | None:
    """The kept tokens of every dataset reported so far; None while none is."""
    known = [d.tokens for d in datasets if d.tokens is not None]
    return sum(known) if known else None


def is_generation_done(datasets: list[DatasetStatus]) -> bool:
    """Every dataset met its budget (or cap) or ran out of prompts: the GPUs can go."""
    return bool(datasets) and all(d.state in DATASET_DONE for d in datasets)


def progress_text(datasets: list[DatasetStatus]) -> str:
    """Percent of the summed budgets, counting no dataset past its own budget; 'done' datasets count whole."""
    total = sum(d.budget_tokens for d in datasets)
    if not total:
        return ""
    kept = sum(d.budget_tokens if d.state in DATASET_DONE else min(d.tokens or 0, d.budget_tokens)
               for d in datasets)
    return f"{100.0 * kept / total:.1f}%"
