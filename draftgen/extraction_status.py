"""The extraction's progress (draftgen_contracts.extraction_progress) as status."""

from __future__ import annotations

from draftgen_contracts.extraction_progress import ExtractionProgress
from draftgen_contracts.timestamps import iso_of

from .api import ExtractionStatus


def extraction_status(report: ExtractionProgress) -> ExtractionStatus:
    return ExtractionStatus(tokens=report.tokens, samples=report.samples, corpus_tokens=report.corpus_tokens,
                            tokens_per_second=report.tokens_per_second, finished=report.finished,
                            report_time=iso_of(report.updated_at))
