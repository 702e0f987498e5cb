"""The merge's settings: what determines the corpus, and the memory it may use."""

from __future__ import annotations

from dataclasses import asdict, dataclass

TRUNCATED_POLICIES = ("keep", "drop", "mark")


@dataclass(frozen=True)
class MergeSettings:
    truncated: str = "mark"
    dedupe: bool = True
    seed: int = 0
    eval_fraction: float = 0.01
    shard_records: int | None = 100_000
    shard_bytes: int | None = 1 << 30
    memory_limit_mb: int = 512
    # The EAGLE-3 draft vocabulary (jobrunner/shared/vocabulary.py): SpecForge's and speculators' default size
    # (specforge 0.2.0 algorithms/eagle3/providers.py; speculators 0.9.0 convert/eagle/eagle3_converter.py).
    draft_vocab_size: int = 32000

    def check(self) -> None:
        if self.truncated not in TRUNCATED_POLICIES:
            raise ValueError(f"truncated policy {self.truncated!r}: expected one of {TRUNCATED_POLICIES}")
        if not 0.0 <= self.eval_fraction < 1.0:
            raise ValueError(f"eval_fraction {self.eval_fraction}: expected 0 <= f < 1")
        if not self.shard_records and not self.shard_bytes:
            raise ValueError("set shard_records or shard_bytes (or both)")
        if self.memory_limit_mb < 64:
            raise ValueError(f"memory_limit_mb {self.memory_limit_mb}: at least 64 is needed")
        if self.draft_vocab_size < 0:
            raise ValueError(f"draft_vocab_size {self.draft_vocab_size}: expected >= 0 (0: no maps)")

    def policies(self) -> dict:
        """What determines the output (the memory limit does not: see the module docstring)."""
        return {k: v for k, v in asdict(self).items() if k != "memory_limit_mb"}
