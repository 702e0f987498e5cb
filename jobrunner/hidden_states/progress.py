"""The extraction's progress as it runs (draftgen_contracts.extraction_progress): written beside the
states every EXTRACTION_REPORT_EVERY_S and at the end, and handed to `publish` (in a pod: the run's
extraction report ConfigMap), for status.extraction and the estimate's measured extraction rate.

Tokens and samples are those on disk (shards flushed), so a reader never sees a count a crash could
take back; the rate counts every token this run extracted, flushed or not, over the time since the
backend was loaded.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from draftgen_contracts import names
from draftgen_contracts.extraction_progress import EXTRACTION_REPORT_EVERY_S, ExtractionProgress
from jobrunner.shared.atomic import write_bytes_atomically


class ExtractionReporter:
    def __init__(self, out_dir: Path, corpus_tokens: int, publish: Callable[[str], None] | None = None,
                 every_s: float = EXTRACTION_REPORT_EVERY_S, clock=time.time, monotonic=time.monotonic,
                 log=print):
        self.path = Path(out_dir) / names.EXTRACTION_KEY
        self.corpus_tokens, self.publish, self.every_s, self.log = corpus_tokens, publish, every_s, log
        self.clock, self.monotonic = clock, monotonic
        self.started = self.last = monotonic()
        self.extracted = 0  # tokens this run, flushed or not

    def start(self) -> None:
        """The backend is loaded: the rate's clock starts now."""
        self.started = self.last = self.monotonic()

    def extracted_batch(self, tokens: int, store) -> None:
        self.extracted += tokens
        if self.monotonic() - self.last >= self.every_s:
            self.report(store, finished=False)

    def report(self, store, finished: bool) -> ExtractionProgress:
        self.last = self.monotonic()
        elapsed = self.last - self.started
        progress = ExtractionProgress(
            updated_at=self.clock(), tokens=store.stored_tokens(), samples=len(store.samples),
            corpus_tokens=self.corpus_tokens, finished=finished,
            tokens_per_second=round(self.extracted / elapsed, 1) if elapsed > 0 and self.extracted else 0.0)
        text = progress.to_json()
        self.log(f"extract: {progress.tokens:,} of {self.corpus_tokens:,} tokens stored ({progress.samples:,} samples), "
                 f"{progress.tokens_per_second:,.0f} tokens/s")
        write_bytes_atomically(self.path, text.encode())
        if self.publish is not None:
            try:
                self.publish(text)
            except Exception as e:  # the states matter more than their progress: extraction goes on
                self.log(f"extract: WARNING: could not publish the progress: {e}")
        return progress
