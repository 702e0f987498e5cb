"""What the requests in flight of one dataset are expected to bring, from the lengths seen so far.

The completed responses alone are a biased sample while requests are in flight: short responses
finish first, and the requests still out are the long ones. So the estimate is Kaplan-Meier's: a
response that completed is an observed length, a request in flight is a length known only to
exceed what it has generated so far (censored). From the survival curve S, a request that has
generated `l` tokens is expected to end at E[L | L > l] = l + (integral of S from l) / S(l). Past the
longest completed length nothing is observed, and S is taken to fall linearly to 0 at the largest
max_new_tokens: with nothing seen yet a request is expected to use half of it. (Flat up to the cap,
the first version, expected every early request to use all of it and held a lone dataset's server
at 0.28 of its capacity in bench/generate_throughput.py.) Erring long holds dispatch early: the
next dataset fills the slots, or the dataset dispatches again as the estimate settles.

Lengths are kept in `BUCKETS` buckets up to the cap, so one estimate costs O(buckets + in flight).
"""

from __future__ import annotations

BUCKETS = 128


class LengthModel:
    def __init__(self, cap: int):
        self.cap = max(1, cap)
        self.width = -(-self.cap // BUCKETS)
        self.completed = [0] * BUCKETS
        self.cut = [0] * BUCKETS  # responses cut at the budget: lengths known only to exceed their own

    def bucket(self, length: float) -> int:
        return min(BUCKETS - 1, max(0, int(length) // self.width))

    def add(self, length: int) -> None:
        """A completed response of `length` tokens."""
        self.completed[self.bucket(length)] += 1

    def add_cut(self, length: int) -> None:
        """A response cut at the budget after `length` tokens: censored for good."""
        self.cut[self.bucket(length)] += 1

    def moments(self, partials: list[float]) -> Moments:
        """The final-length table under the Kaplan-Meier curve of the completed lengths and the
        in-flight partials."""
        censored = list(self.cut)
        for p in partials:
            censored[self.bucket(p)] += 1
        return Moments(self, _survival(self.completed, censored))

    def expected_finals(self, partials: list[float]) -> list[float]:
        """For each request in flight (its tokens generated so far), the length it is expected to end at."""
        return self.moments(partials).expected_finals(partials)

    def expected_response(self) -> float:
        """The expected length of a request not sent yet, from the completed lengths alone."""
        return self.moments([]).mean[0]


class Moments:
    """Per bucket b, the mean and variance of L given L > b * width: E[L | L > l] = l + A(l) / S(l)
    and E[(L - l)^2 | L > l] = 2 (J(l) - l A(l)) / S(l), with A the integral of S from l and J that
    of x S(x) (trapezoids, summed from the top down)."""

    def __init__(self, model: LengthModel, survival: list[float]):
        self.model = model
        w = model.width
        self.mean, self.variance = [0.0] * BUCKETS, [0.0] * BUCKETS
        a = j = 0.0
        for b in range(BUCKETS - 1, -1, -1):
            lo, hi = b * w, (b + 1) * w
            a += w * (survival[b] + survival[b + 1]) / 2
            j += w * (lo * survival[b] + hi * survival[b + 1]) / 2
            if survival[b] > 0:
                rest = a / survival[b]
                self.mean[b] = lo + rest
                self.variance[b] = max(0.0, 2 * (j - lo * a) / survival[b] - rest * rest)
            else:
                self.mean[b] = lo

    def final(self, partial: float) -> tuple[float, float]:
        """The expected final length of a request in flight that has generated `partial` tokens
        (never below it), and its variance."""
        b = self.model.bucket(partial)
        return max(partial, self.mean[b]), self.variance[b]

    def expected_finals(self, partials: list[float]) -> list[float]:
        return [self.final(p)[0] for p in partials]


def _survival(events: list[int], censored: list[int]) -> list[float]:
    """S at each bucket's start (and 0 past the cap): Kaplan-Meier, events before censorings in a
    bucket; past the last completed length, where nothing is known, S falls linearly to 0 at the cap."""
    at_risk = sum(events) + sum(censored)
    s, out = 1.0, []
    for d, c in zip(events, censored):
        out.append(s)
        if at_risk > 0 and d:
            s *= 1 - d / at_risk
        at_risk -= d + c
    out.append(0.0)
    unknown_from = max((b + 1 for b, d in enumerate(events) if d), default=0)
    for b in range(unknown_from + 1, BUCKETS):
        out[b] = out[unknown_from] * (BUCKETS - b) / (BUCKETS - unknown_from)
    return out
