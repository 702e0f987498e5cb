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

    def _bucket(self, length: float) -> int:
        return min(BUCKETS - 1, max(0, int(length) // self.width))

    def add(self, length: int) -> None:
        """A completed response of `length` tokens."""
        self.completed[self._bucket(length)] += 1

    def expected_finals(self, partials: list[float], table: list[float] | None = None) -> list[float]:
        """For each request in flight (its tokens generated so far), the length it is expected to end
        at (`table`: `final_length_table(partials)`, when the caller has it already)."""
        table = table or self.final_length_table(partials)
        return [max(p, table[self._bucket(p)]) for p in partials]

    def expected_response(self, partials: list[float] = ()) -> float:
        """The expected length of a request not sent yet."""
        return self.final_length_table(partials)[0]

    def final_length_table(self, partials) -> list[float]:
        """Per bucket b, E[L | L > b * width] under the Kaplan-Meier curve of the completed lengths
        and the in-flight partials."""
        censored = [0] * BUCKETS
        for p in partials:
            censored[self._bucket(p)] += 1
        survival = _survival(self.completed, censored)
        # Integral of S over each bucket (trapezoids), summed from the top down.
        tail, table = 0.0, [0.0] * BUCKETS
        for b in range(BUCKETS - 1, -1, -1):
            tail += self.width * (survival[b] + survival[b + 1]) / 2
            start = b * self.width
            table[b] = start + tail / survival[b] if survival[b] > 0 else start
        return table


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
