"""When and how soon a failed /generate is sent again: capped exponential backoff, full jitter."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import aiohttp

from draftgen_contracts.sglang_protocol import is_retryable_status


@dataclass(frozen=True)
class RetryPolicy:
    """Capped exponential backoff with full jitter, bounded by attempts and optionally by the
    total time of one generate call (its generation time included, so a bound shorter than a
    long response would forbid retrying it: off by default)."""

    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    max_elapsed_s: float | None = None
    seed: int | None = None


# Failures of the connection rather than answers: refused, reset, closed mid-body, timed out.
TRANSPORT_ERRORS = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, asyncio.TimeoutError)


def is_retryable(status_or_exception: int | BaseException) -> bool:
    """Whether a failed /generate may be sent again: transport failures, timeouts, 408/429 and
    5xx. Never a 4xx answer about the request itself, nor a contract-breaking 200."""
    if isinstance(status_or_exception, (bool, int)):
        return is_retryable_status(status_or_exception)
    return isinstance(status_or_exception, TRANSPORT_ERRORS)


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Seconds to wait before retry number `attempt` (1 = first retry): uniform in
    [0, min(cap, base * 2**(attempt-1))] ("full jitter")."""
    if attempt < 1:
        raise ValueError("attempt starts at 1")
    ceiling = min(cap, base * (2.0 ** min(attempt - 1, 62)))
    return rng.uniform(0.0, ceiling)
