"""The extraction's progress: what `jobrunner extract` publishes about itself while it runs and once
at its end, for status.extraction and the estimate's measured extraction rate.

One model for the writer (jobrunner extract) and its readers (the operator, the local runner). In a
cluster it is the `extraction.json` key of the run's extraction report ConfigMap; locally (and
always, beside the states) the file `hidden-states/extraction.json`.

    {"updated_at": 1700000000.0, "tokens": 5120, "samples": 40, "corpus_tokens": 20480,
     "tokens_per_second": 812.5, "finished": false}
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .progress import Document, parse_document

# How often a running extraction publishes (one write; one PATCH in a cluster): its rate and tokens
# move slowly over hours, and a report costs the API server a watch event to every reader.
EXTRACTION_REPORT_EVERY_S = 15.0


class ExtractionProgress(Document):
    updated_at: float  # the writer's wall clock (Unix seconds)
    tokens: int = Field(0, ge=0)  # tokens stored, by this run and any it resumed
    samples: int = Field(0, ge=0)  # samples stored, likewise
    corpus_tokens: int = Field(0, ge=0)  # tokens of the corpus splits it reads (before truncation and skips)
    # Tokens this run extracted per second since its backend was loaded (loading excluded, as the
    # estimate excludes it): the rate of this hardware, model and backend. 0 until a batch is done.
    tokens_per_second: float = Field(0.0, ge=0)
    finished: bool = False
    # Set when the output volume filled: where, how much is free and what it still needs, in words.
    volume_full: str = ""

    def to_json(self) -> str:
        return self.model_dump_json()


def parse_extraction_progress(data: Any) -> ExtractionProgress | None:
    """The progress from its JSON text or decoded value; None when missing or malformed."""
    return parse_document(ExtractionProgress, data)
