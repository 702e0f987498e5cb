"""The progress document: what a generate process publishes about itself, about once a second.

One model for the writer (jobrunner generate) and every reader (the operator's fold, the local
runner, the coordinators). Every total in it is durable: the writer fsyncs its output first. In a
cluster it is the `progress.json` key of the replica's report ConfigMap; locally a
`progress-rNNN.json` file.

    {"replica": 0, "replicas": 2, "updated_at": 1700000000.0, "finished": false, "error": null,
     "datasets": {"<name>": {"state": "Generating", "completion_tokens": 123, "samples": 4,
                             "skipped": 1, "skipped_by_reason": {"too_long": 1}, "truncated": 0,
                             "budget_tokens": 10000, "tokens_per_second": 812.5, "eta_s": 11.2,
                             "in_flight": 150, "settled": false,
                             "elsewhere": {"1": {"completion_tokens": 90, "samples": 3, ...}}}}}
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .states import DatasetState


class Document(BaseModel):
    # Readers ignore fields they do not know, so a newer writer never breaks an older reader.
    model_config = ConfigDict(extra="ignore")


class DurableCounts(Document):
    """What one part of a dataset holds on disk as of its last sync (jobrunner.shared.output): the totals of
    a replica's own report, and of the other replicas' parts it found when it started (`elsewhere`)."""
    completion_tokens: int = Field(0, ge=0)
    samples: int = Field(0, ge=0)
    skipped: int = Field(0, ge=0)
    truncated: int = Field(0, ge=0)  # responses cut off: at max_new_tokens, or at the budget
    cut: int = Field(0, ge=0)  # of them, cut at the budget (`at_budget: cut`)
    cut_tokens: int = Field(0, ge=0)  # the completion tokens of those


class DatasetProgress(DurableCounts):
    state: DatasetState = DatasetState.PENDING
    skipped_by_reason: dict[str, int] = Field(default_factory=dict)
    budget_tokens: int = Field(0, ge=0)
    tokens_per_second: float = 0.0
    eta_s: float | None = None
    in_flight: int = Field(0, ge=0)
    # Sends no more for this dataset and has nothing in flight, so `completion_tokens` is final for
    # this budget (draftgen_contracts.budget_shares): the replica finishing the dataset counts on it.
    settled: bool = False
    # The other replicas' durable parts, by replica index, as this one found them on disk at its
    # start (the output folder is shared); a fold uses them only for a replica that has not reported.
    elsewhere: dict[int, DurableCounts] = Field(default_factory=dict)


class ProgressDocument(Document):
    replica: int = Field(ge=0)
    replicas: int = Field(ge=1)
    updated_at: float  # the writer's wall clock (Unix seconds): the report's identity in status.replicas[]
    finished: bool = False
    error: str | None = None  # why the replica cannot run (written before it exits with BAD_CONFIG)
    # What this replica does otherwise than the spec says, and why (cutting at the budget off: the
    # server refuses aborts, or answers them without output); said on the object (condition AtBudget).
    notices: list[str] = Field(default_factory=list, max_length=8)
    datasets: dict[str, DatasetProgress] = Field(default_factory=dict)

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=True)

    def tokens(self) -> dict[str, int]:
        """Completion tokens per dataset."""
        return {name: d.completion_tokens for name, d in self.datasets.items()}


def parse_document(model: type[Document], data: Any):
    """A document of `model` from its JSON text or decoded value; None when it is missing or
    malformed (a reader keeps its last view rather than failing on one bad report)."""
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except ValueError:
            return None
    if not isinstance(data, dict):
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def parse_progress(data: Any) -> ProgressDocument | None:
    return parse_document(ProgressDocument, data)

