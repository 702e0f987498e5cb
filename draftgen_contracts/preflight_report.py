"""The preflight's findings: the model's facts, each dataset's rows and reach, and the problem that
makes the run impossible, if any (docs/preflight.md).

One model for the writer and every reader. jobrunner.preflight builds it, adding what only people
read (the tokenizer, each dataset's file, prompt lengths and shapes; its own subclasses of these
models), and writes it as `preflight.json`: in a cluster the key of the run's preflight ConfigMap,
locally and on the volume `<output root>/preflight.json`, snake_case. The operator and the local
runner parse this much of it, and the status shows it (`status.preflight`, camelCase, by these
same models: draftgen.api.Preflight), so the fields have both spellings and either parses.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .progress import parse_document

# The response length assumed of a row before any response of its dataset exists: this share of its
# max new tokens (the estimate replaces it with the dataset's measured mean once responses exist).
PRIOR_RESPONSE_FRACTION = 0.5


class _Findings(BaseModel):
    # Readers ignore fields they do not know (the writer's details, a newer writer's fields). No
    # docstrings on the models below: the CRD would show them as the status fields' descriptions.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class ModelReport(_Findings):
    architecture: str = ""
    hidden_size: int = 0
    num_layers: int = 0
    vocab_size: int = 0
    context_length: int | None = None


class DatasetReport(_Findings):
    name: str
    rows: int = 0
    usable_rows: int = 0
    prompt_tokens: int = 0
    skipped_by_reason: dict[str, int] = Field(default_factory=dict)
    files: int = Field(0, description="The files of its folder, glob or shard set (1 for a file).")
    ignored_fields: dict[str, int] = Field(default_factory=dict, description=(
        "Fields of its rows draftgen does not honour (an OpenAI batch request's own sampling, model, ...) -> rows "
        "(docs/inputs.md)."))
    expected_response_tokens: int = Field(0, description=(
        "Usable rows x the stated prior (half of each row's max new tokens): what the rows may give."))


class Problem(_Findings):
    where: str  # the file, and the row and field when a row is to blame
    message: str

    def says(self) -> str:
        return f"{self.where}: {self.message}"


class PreflightReport(_Findings):
    model: ModelReport | None = None
    datasets: list[DatasetReport] = Field(default_factory=list)
    problem: Problem | None = None
    seconds: float = 0.0
    rows_per_second: float = 0.0


def parse_preflight(data: Any) -> PreflightReport | None:
    """The findings from their JSON text or decoded value; None when missing or malformed."""
    return parse_document(PreflightReport, data)
