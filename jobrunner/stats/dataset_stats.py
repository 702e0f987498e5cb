"""Per-dataset statistics from the durable part summaries (`jobrunner.shared.output.read_summary`), which
hold every completed response's length: they survive restarts and never reread the records."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field

from draftgen_contracts import budget
from draftgen_contracts.length_stats import LengthStats, length_counts, length_stats
from jobrunner.shared.output import datasets_in, read_summary, summary_replicas


@dataclass
class DatasetStats:
    dataset: str
    samples: int = 0
    completion_tokens: int = 0
    prompt_tokens: int = 0
    truncated: int = 0  # at max_new_tokens (the responses cut at the budget are `cut`)
    truncated_share: float = 0.0
    cut: int = 0  # cut at the budget (`at_budget: cut`)
    cut_share: float = 0.0  # of the samples
    cut_tokens: int = 0
    cut_token_share: float = 0.0  # of the kept tokens
    skipped: int = 0
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    tokens_per_second: float = 0.0
    lengths: LengthStats = field(default_factory=LengthStats)
    prompt_lengths: LengthStats = field(default_factory=LengthStats)
    budget_tokens: int | None = None
    percent_of_budget: float | None = None
    eta_s: float | None = None

    def to_json(self) -> dict:
        return asdict(self)


def dataset_stats(output_root: str | os.PathLike, dataset: str, budget_tokens: int | None = None) -> DatasetStats:
    """Final statistics of one dataset over every replica's durable summary. Tokens/s is the tokens
    over the span from the first request sent to the last completion recorded (restarts included,
    so downtime lowers it); from the first completion for summaries older than the send time."""
    st = DatasetStats(dataset, budget_tokens=budget_tokens)
    lengths: list[int] = []
    prompt_lengths: list[int] = []
    first, last = math.inf, -math.inf
    for replica in summary_replicas(output_root, dataset):
        s = read_summary(output_root, dataset, replica)
        if s is None:
            continue
        st.samples += s.records
        st.completion_tokens += s.completion_tokens
        st.prompt_tokens += s.prompt_tokens
        st.truncated += s.finish_reasons.get("length", 0) - s.cut_records
        st.cut += s.cut_records
        st.cut_tokens += s.cut_tokens
        st.skipped += s.skipped
        for reason, n in s.skipped_by_reason.items():
            st.skipped_by_reason[reason] = st.skipped_by_reason.get(reason, 0) + n
        lengths.extend(s.lengths)
        prompt_lengths.extend(s.prompt_lengths)
        if s.first_finished_at is not None:
            first = min(first, s.first_started_at if s.first_started_at is not None else s.first_finished_at)
            last = max(last, s.last_finished_at)
    st.lengths = length_stats(length_counts(lengths))
    st.prompt_lengths = length_stats(length_counts(prompt_lengths))
    st.truncated_share = st.truncated / st.samples if st.samples else 0.0
    st.cut_share = st.cut / st.samples if st.samples else 0.0
    st.cut_token_share = st.cut_tokens / st.completion_tokens if st.completion_tokens else 0.0
    if last > first:
        st.tokens_per_second = st.completion_tokens / (last - first)
    if budget_tokens:
        st.percent_of_budget = 100.0 * st.completion_tokens / budget_tokens
        st.eta_s = budget.eta_seconds(budget_tokens, st.completion_tokens, st.tokens_per_second)
    return st


def all_dataset_stats(output_root: str | os.PathLike, budgets: dict[str, int] | None = None) -> list[DatasetStats]:
    budgets = budgets or {}
    return [dataset_stats(output_root, name, budgets.get(name)) for name in datasets_in(output_root)]


def all_lengths(output_root: str | os.PathLike, dataset: str, prompts: bool = False) -> list[int]:
    """Every completed response's length (or its prompt's, `prompts`) for one dataset, over all
    replicas (for histograms)."""
    lengths: list[int] = []
    for replica in summary_replicas(output_root, dataset):
        s = read_summary(output_root, dataset, replica)
        if s is not None:
            lengths.extend(s.prompt_lengths if prompts else s.lengths)
    return lengths
