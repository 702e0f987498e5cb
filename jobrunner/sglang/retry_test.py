"""Which failures are retried, and how long the client waits between attempts."""

from __future__ import annotations

import asyncio
import random

import aiohttp
import pytest

from draftgen_contracts.sglang_protocol import InvalidResponse
from jobrunner.sglang.retry import backoff_delay, is_retryable


@pytest.mark.parametrize("status", [500, 502, 503, 504, 429, 408])
def test_server_side_statuses_are_retryable(status):
    assert is_retryable(status)


@pytest.mark.parametrize("status", [400, 401, 404, 413, 422])
def test_request_errors_are_not_retryable(status):
    assert not is_retryable(status)


def test_transport_failures_are_retryable_other_exceptions_not():
    assert is_retryable(aiohttp.ServerDisconnectedError())
    assert is_retryable(aiohttp.ClientOSError(104, "Connection reset by peer"))
    assert is_retryable(aiohttp.ClientPayloadError("cut mid-body"))
    assert is_retryable(asyncio.TimeoutError())
    assert not is_retryable(InvalidResponse("bad"))
    assert not is_retryable(ValueError("x"))


def test_backoff_is_full_jitter_under_a_capped_exponential():
    rng = random.Random(1)
    for attempt in range(1, 12):
        ceiling = min(8.0, 0.5 * 2 ** (attempt - 1))
        draws = [backoff_delay(attempt, 0.5, 8.0, rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in draws)
        assert max(draws) > 0.5 * ceiling  # jitter spreads over the whole window
    assert backoff_delay(1000, 0.5, 8.0, rng) <= 8.0
    with pytest.raises(ValueError):
        backoff_delay(0, 0.5, 8.0, rng)


def test_backoff_is_reproducible_from_the_seed():
    a = [backoff_delay(3, 1.0, 30.0, random.Random(7)) for _ in range(3)]
    b = [backoff_delay(3, 1.0, 30.0, random.Random(7)) for _ in range(3)]
    assert a == b
