"""The preflight's findings as its readers need them (jobrunner.preflight writes the whole document;
the operator and the local runner read this much of it): the model's facts, each dataset's rows and
reach, and the problem that makes the run impossible, if any. In a cluster it is the `preflight.json`
key of the run's preflight ConfigMap; locally and on the volume, `<output root>/preflight.json`."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .progress import _Document, parse_document

# The response length assumed of a row before any response of its dataset exists: this share of its
# max new tokens (the estimate replaces it with the dataset's measured mean once responses exist).
PRIOR_RESPONSE_FRACTION = 0.5


class ModelReport(_Document):
    architecture: str = ""
    hidden_size: int = 0
    num_layers: int = 0
    vocab_size: int = 0
    context_length: int | None = None


class DatasetReport(_Document):
    name: str
    rows: int = 0
    usable_rows: int = 0
    prompt_tokens: int = 0
    skipped_by_reason: dict[str, int] = Field(default_factory=dict)
    budget_tokens: int = 0
    expected_response_tokens: int = 0  # usable rows x PRIOR_RESPONSE_FRACTION of each row's max new tokens
    budget_reachable: bool = True


class Problem(_Document):
    where: str
    message: str

    def says(self) -> str:
        return f"{self.where}: {self.message}"


class PreflightReport(_Document):
    model: ModelReport | None = None
    datasets: list[DatasetReport] = Field(default_factory=list)
    problem: Problem | None = None
    seconds: float = 0.0
    rows_per_second: float = 0.0


def parse_preflight(data: Any) -> PreflightReport | None:
    """The findings from their JSON text or decoded value; None when missing or malformed."""
    return parse_document(PreflightReport, data)
