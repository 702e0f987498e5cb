"""One dataset's live state in this generate process, and the budget questions it answers."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from draftgen_contracts import budget
from draftgen_contracts.progress import DatasetProgress
from jobrunner.config import DatasetConfig
from jobrunner.output import PartWriter
from jobrunner.prompts import Prompt
from jobrunner.stats import RateMeter


def replica_sample_cap(sample_cap: int | None, replicas: int, replica: int) -> int | None:
    """This replica's share of a dataset's sample cap: the shares add up to the cap exactly."""
    if sample_cap is None:
        return None
    return sample_cap // replicas + (1 if replica < sample_cap % replicas else 0)


def sampling_params_for(dataset: DatasetConfig, prompt: Prompt) -> dict:
    return {**dataset.sampling_params, "max_new_tokens": prompt.max_new_tokens}


@dataclass
class DatasetRun:
    """The live state of one dataset in this process."""

    config: DatasetConfig
    writer: PartWriter
    sample_cap: int | None
    replicas: int = 1  # replicas sharing the budget: this one holds dispatch against its share
    in_flight: dict[int, tuple[asyncio.Task, str]] = field(default_factory=dict)  # row -> (task, rid)
    tokens_elsewhere: int = 0
    stopped_externally: bool = False
    started: bool = False
    rows_exhausted: bool = False
    stopping: bool = False  # dispatch stopped and in-flight aborted
    transient_failures: int = 0
    rate: RateMeter = field(default_factory=RateMeter)
    # For `budget.in_flight_covers_budget`: the sum of the in-flight requests' send times (their
    # total age in O(1)), and this process's completed responses, their tokens and seconds.
    dispatched_at_sum: float = 0.0
    responses: int = 0
    response_tokens: int = 0
    response_seconds: float = 0.0

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def tokens(self) -> int:
        """Tokens counted against the budget: own written ones plus the other replicas' published ones."""
        return self.writer.totals.completion_tokens + self.tokens_elsewhere

    def is_done(self) -> bool:
        return budget.is_dataset_done(self.config.budget_tokens, self.tokens, self.sample_cap,
                                      self.writer.totals.records, self.stopped_externally)

    def should_dispatch(self) -> bool:
        return not self.stopping and budget.should_dispatch(
            self.config.budget_tokens, self.tokens, self.sample_cap, self.writer.totals.records,
            len(self.in_flight), self.stopped_externally) and not self.in_flight_covers_budget()

    def in_flight_covers_budget(self) -> bool:
        in_flight_seconds = len(self.in_flight) * time.monotonic() - self.dispatched_at_sum
        return budget.in_flight_covers_budget(
            self.config.budget_tokens, self.tokens, len(self.in_flight), in_flight_seconds,
            self.responses, self.response_tokens, self.response_seconds, self.replicas)

    def state(self) -> str:
        exhausted = self.rows_exhausted and not self.in_flight and self.transient_failures == 0
        return budget.dataset_state(self.config.budget_tokens, self.tokens, self.sample_cap,
                                    self.writer.totals.records, started=self.started, exhausted=exhausted,
                                    stopped=self.stopped_externally)

    def progress(self, now: float) -> DatasetProgress:
        """Published totals: the durable ones only (the writer's last sync)."""
        durable = self.writer.durable
        rate = self.rate.rate(now)
        return DatasetProgress(
            state=self.state(), completion_tokens=durable.completion_tokens, samples=durable.records,
            skipped=durable.skipped, skipped_by_reason=dict(durable.skipped_by_reason),
            truncated=durable.finish_reasons.get("length", 0), budget_tokens=self.config.budget_tokens,
            tokens_per_second=round(rate, 1), eta_s=budget.eta_seconds(self.config.budget_tokens, self.tokens, rate),
            in_flight=len(self.in_flight))
