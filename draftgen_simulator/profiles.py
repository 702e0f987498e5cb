"""Response-length distributions for the SGLang simulator.

Lognormal fits to the response lengths of the run draftgen was built to replace: function calling
median 471 / mean 1,314 (gives ~30% > 1K and ~5% > 5K against the observed 37% / 4.5%), code ~3.8K mean, math/reasoning
long, chat medium, SWE agent traces in between. `fixed:N` gives exactly N tokens (EOS included).
A length is the *natural* response length; max_new_tokens may cut it (finish_reason length).
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class LengthProfile:
    name: str
    median: float = 0.0
    sigma: float = 0.0
    fixed: int | None = None
    max_len: int = 1 << 20

    def sample(self, rng: random.Random) -> int:
        if self.fixed is not None:
            return self.fixed
        return max(1, min(self.max_len, round(rng.lognormvariate(math.log(self.median), self.sigma))))

    @property
    def mean(self) -> float:
        if self.fixed is not None:
            return float(self.fixed)
        return self.median * math.exp(self.sigma**2 / 2)


def _lognormal_from_median_mean(name: str, median: float, mean: float) -> LengthProfile:
    return LengthProfile(name, median=median, sigma=math.sqrt(2 * math.log(mean / median)))


PROFILES: dict[str, LengthProfile] = {
    p.name: p
    for p in (
        _lognormal_from_median_mean("function_calling", 471, 1314),
        LengthProfile("code", median=2800, sigma=0.78),  # mean ~3.8K
        LengthProfile("math", median=4500, sigma=0.8),  # long reasoning, mean ~6.2K
        LengthProfile("chat", median=600, sigma=0.9),  # mean ~900
        LengthProfile("swe", median=1200, sigma=1.0),  # mean ~2K
        # The CPU quickstart's: its limits are 400 and 600 new tokens, so most responses end by
        # stop (about 4% cut at 400) and the long tail still shows in the report.
        LengthProfile("quickstart", median=100, sigma=0.8),  # mean ~138
    )
}


def get_profile(name: str) -> LengthProfile:
    """A named profile or `fixed:N`; ValueError names the choices."""
    if name.startswith("fixed:"):
        try:
            n = int(name.split(":", 1)[1])
        except ValueError:
            n = -1
        if n < 1:
            raise ValueError(f"bad profile {name!r}: fixed:N needs an integer N >= 1")
        return LengthProfile(name, fixed=n)
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)} or fixed:N")
    return PROFILES[name]


def seeded_rng(seed: int, *parts: object) -> random.Random:
    """A Random that depends only on the seed and `parts` (never on Python's hash salt)."""
    h = hashlib.sha256(repr((seed, *parts)).encode()).digest()
    return random.Random(int.from_bytes(h[:16], "big"))
