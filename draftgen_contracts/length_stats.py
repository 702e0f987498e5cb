"""The one summary of a length distribution, used by `jobrunner stats` and the corpus manifest
alike, so both print the same p90 for the same responses.

Lengths are held as {length: count}: exact, and bounded by the number of distinct lengths however
many responses there are. Quantiles are nearest-rank (the smallest length with at least q of the
samples at or below it), so every quantile is a length that occurred.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class LengthStats:
    count: int = 0
    sum: int = 0
    mean: float = 0.0
    min: int = 0
    median: int = 0
    p90: int = 0
    p99: int = 0
    max: int = 0
    share_over_1k: float = 0.0
    share_over_5k: float = 0.0

    def to_json(self) -> dict:
        return asdict(self)


def nearest_rank(ordered: list[tuple[int, int]], n: int, q: float) -> int:
    """The q-quantile (0 < q <= 1) of n samples given as sorted (length, count) pairs."""
    rank = max(1, math.ceil(q * n))
    seen = 0
    for length, count in ordered:
        seen += count
        if seen >= rank:
            return length
    return ordered[-1][0]


def length_stats(counts: Mapping[int, int]) -> LengthStats:
    ordered = sorted((length, c) for length, c in counts.items() if c > 0)
    n = sum(c for _, c in ordered)
    if n == 0:
        return LengthStats()
    total = sum(length * c for length, c in ordered)
    return LengthStats(
        count=n, sum=total, mean=round(total / n, 3), min=ordered[0][0], median=nearest_rank(ordered, n, 0.5),
        p90=nearest_rank(ordered, n, 0.9), p99=nearest_rank(ordered, n, 0.99), max=ordered[-1][0],
        share_over_1k=round(sum(c for length, c in ordered if length > 1000) / n, 6),
        share_over_5k=round(sum(c for length, c in ordered if length > 5000) / n, 6))


def length_counts(lengths: Iterable[int]) -> Counter:
    return Counter(lengths)
