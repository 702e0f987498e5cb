"""What one extraction run is asked for: the spec's `extraction` as `jobrunner extract` takes it, one
object instead of a dozen parameters (the command builds it from its flags, the tests and benchmarks
from what they are about)."""

from __future__ import annotations

from dataclasses import dataclass

from . import selection
from .backend import FINAL_STATES


@dataclass(frozen=True)
class ExtractionSettings:
    splits: tuple[str, ...]  # the corpus's splits to extract ("train", "eval")
    aux_layers: tuple[int, ...] | None = None  # None: the layers each drafter reads by default
    drafters: tuple[str, ...] = ("eagle3",)  # whose layers one forward stores (draftgen_contracts.drafters)
    final_state: str = "post-norm"  # one of FINAL_STATES
    dtype: str = "bf16"
    max_len: int | None = None  # a sample's tokens at most (None: no limit)
    too_long: str = "truncate"  # what a longer sample gets: one of selection.TOO_LONG_POLICIES
    max_batch_tokens: int = 16384  # padded tokens of one forward
    max_batch_size: int = 64
    sort_window: int = 2048  # samples sorted by length together, so a batch pads little
    shard_mb: float = 1024  # a shard is written once it holds this much
    backend: str = "transformers"  # what runs the model (recorded with the states; a resume must match)

    def problem(self) -> str | None:
        """What is wrong with the settings alone (the layers need the model: selection.check_aux_layers)."""
        if self.too_long not in selection.TOO_LONG_POLICIES:
            return f"too-long policy {self.too_long!r}: expected one of {selection.TOO_LONG_POLICIES}"
        if self.final_state not in FINAL_STATES:
            return f"final state {self.final_state!r}: expected one of {FINAL_STATES}"
        if self.max_len is not None and self.max_len > self.max_batch_tokens:
            return f"max_len {self.max_len} exceeds max_batch_tokens {self.max_batch_tokens}: a sample must fit a batch"
        return None
