"""Tokens per second over a sliding window of recent completions (the live progress and ETA)."""

from __future__ import annotations

import collections


class RateMeter:
    """Tokens per second over a sliding window of recent completions (live progress, ETA)."""

    def __init__(self, window_s: float = 60.0):
        self.window_s = window_s
        self._events: collections.deque[tuple[float, int]] = collections.deque()
        self._tokens_in_window = 0
        self._started: float | None = None

    def add(self, now: float, tokens: int) -> None:
        if self._started is None:
            self._started = now
        self._events.append((now, tokens))
        self._tokens_in_window += tokens
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self._events and self._events[0][0] < now - self.window_s:
            self._tokens_in_window -= self._events.popleft()[1]

    def rate(self, now: float) -> float:
        self._trim(now)
        if self._started is None:
            return 0.0
        span = min(self.window_s, now - self._started)
        return self._tokens_in_window / span if span > 0 else 0.0
