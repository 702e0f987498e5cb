"""SGLangClient against the simulator (and two tiny misbehaving servers)."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web

from draftgen_contracts.sglang_protocol import (
    BadRequest,
    InvalidResponse,
    InvalidSamplingParams,
    RequestFailed,
    ServerNotReady,
    TokenOutsideVocabulary,
)
from jobrunner.sglang.client import SGLangClient
from jobrunner.sglang.retry import RetryPolicy
from jobrunner.sglang.rids import make_rid, retry_rid
from draftgen_simulator.config import FaultRates, SimConfig
from draftgen_simulator.responses import fault_for

FAST = dict(per_request_tps=5000.0, capacity_tps=1e6, tick_s=0.005)
QUICK_RETRY = RetryPolicy(max_attempts=8, base_delay_s=0.01, max_delay_s=0.05, max_elapsed_s=30, seed=0)
LONG = dict(profile="fixed:100000", per_request_tps=500, context_len=200_000)


@pytest.fixture
async def clients():
    made: list[SGLangClient] = []

    def _make(url, **kwargs):
        kwargs.setdefault("retry", QUICK_RETRY)
        client = SGLangClient(url, **kwargs)
        made.append(client)
        return client

    yield _make
    for c in made:
        await c.aclose()


async def _serve(app: web.Application):
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


async def test_generate_returns_a_result(simulator, clients):
    url = simulator(profile="fixed:12", **FAST).base_url
    client = clients(url)
    rid = make_rid("run", "ds/000000001", 0)
    r = await client.generate([5, 6, 7], {"max_new_tokens": 64, "temperature": 0.7}, rid)
    assert (r.finish_reason, r.completion_tokens, len(r.output_ids), r.prompt_tokens) == ("stop", 12, 12, 3)
    assert (r.rid, r.attempts) == (rid, 1)
    info = await client.model_info()
    assert info.max_model_len == 16_384


@pytest.mark.parametrize("fault", ["http_503", "http_500", "reset"])
async def test_retries_flaky_server_until_success(simulator, clients, fault):
    sim = simulator(profile="fixed:5", faults={fault: 0.5}, seed=11, **FAST)
    url = sim.base_url
    client = clients(url)
    results = await asyncio.gather(*(client.generate([i], {"max_new_tokens": 8}, make_rid("run", f"d/{i}", 0)) for i in range(16)))
    assert all(r.finish_reason == "stop" and r.completion_tokens == 5 for r in results)
    assert sim.stats.faults[fault] > 0
    assert max(r.attempts for r in results) > 1
    assert sim.stats.completed == 16


async def test_gives_up_after_max_attempts(simulator, clients):
    sim = simulator(faults={"http_500": 1.0}, **FAST)
    url = sim.base_url
    client = clients(url, retry=RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.02, seed=0))
    with pytest.raises(RequestFailed) as err:
        await client.generate([1], None, make_rid("run", "x", 0))
    assert err.value.attempts == 3 and err.value.last_error == 500
    assert sim.stats.faults["http_500"] == 3


async def test_server_400_is_not_retried(simulator, clients):
    sim = simulator(context_len=32, **FAST)
    url = sim.base_url
    client = clients(url)
    with pytest.raises(BadRequest, match="maximum context length") as err:
        await client.generate(list(range(20)), {"max_new_tokens": 20}, make_rid("run", "x", 0))
    assert err.value.status == 400
    assert sim.stats.rejected == 1


async def test_bad_sampling_params_fail_before_sending(simulator, clients):
    sim = simulator(**FAST)
    url = sim.base_url
    client = clients(url)
    with pytest.raises(InvalidSamplingParams, match="max_tokens"):
        await client.generate([1], {"max_tokens": 5}, make_rid("run", "x", 0))
    assert sim.stats.rejected == 0 and sim.stats.requests == 0


async def test_ids_outside_the_vocabulary_are_refused_before_sending(simulator, clients):
    sim = simulator(**FAST)
    client = clients(sim.base_url, vocab_size=512)
    for ids in ([1, 512], [-1, 2]):
        with pytest.raises(TokenOutsideVocabulary, match="outside the model's vocabulary of 512") as refused:
            await client.generate(ids, {"max_new_tokens": 5}, make_rid("run", "x", 0))
        assert refused.value.skip_reason == "token_outside_vocabulary"
    assert sim.stats.requests == 0
    assert (await client.generate([1, 511], {"max_new_tokens": 5}, make_rid("run", "x", 1))).completion_tokens == 5


async def test_response_with_prompt_in_output_ids_is_rejected(clients):
    async def buggy(request):
        return web.json_response({"text": "", "output_ids": [1, 2, 3, 4], "meta_info": {
            "id": "r", "finish_reason": {"type": "stop", "matched": 4}, "prompt_tokens": 2, "completion_tokens": 2}})

    app = web.Application()
    app.router.add_post("/generate", buggy)
    runner, url = await _serve(app)
    try:
        with pytest.raises(InvalidResponse):
            await clients(url).generate([1, 2], None, make_rid("run", "x", 0))
    finally:
        await runner.cleanup()


async def test_wait_ready_through_refused_port_and_warmup(simulator, clients):
    url = simulator(startup_delay_s=0.4, warmup_s=0.3, **FAST).base_url
    started = time.monotonic()
    await clients(url).wait_ready(10, poll_interval_s=0.05)
    assert time.monotonic() - started >= 0.6


async def test_wait_ready_times_out_with_a_clear_error(simulator, clients):
    url = simulator(startup_delay_s=30, **FAST).base_url
    with pytest.raises(ServerNotReady, match="not ready after"):
        await clients(url).wait_ready(0.4, poll_interval_s=0.05)


async def test_wait_ready_falls_back_to_health_generate_on_old_servers(clients):
    calls = []

    async def health(request):
        calls.append(request.path)
        return web.Response(status=503 if len(calls) < 2 else 200)

    app = web.Application()
    app.router.add_get("/health_generate", health)
    runner, url = await _serve(app)
    try:
        await clients(url).wait_ready(5, poll_interval_s=0.02)
    finally:
        await runner.cleanup()
    assert calls == ["/health_generate", "/health_generate"]


async def abort_one_in_flight(client):
    """Start an unbounded request, abort it while it generates, return what came back."""
    rid = make_rid("run", "x", 0)
    task = asyncio.create_task(client.generate([1], {"max_new_tokens": None}, rid))
    await asyncio.sleep(0.2)
    await client.abort(rid)
    return await task


async def test_abort_in_flight_request_returns_abort(simulator, clients):
    sim = simulator(**LONG)
    url = sim.base_url
    result = await abort_one_in_flight(clients(url))
    assert result.finish_reason == "abort" and result.completion_tokens == len(result.output_ids) > 0
    assert sim.stats.tokens_generated_after_abort == 0


async def test_abort_reaches_the_retry_rid(simulator, clients):
    config = SimConfig(seed=5, faults=FaultRates(http_503=0.5))
    rid = next(r for r in (make_rid("run", f"d/{i}", 0) for i in range(200))
               if fault_for(config, r) == "http_503" and fault_for(config, retry_rid(r, 1)) is None)
    sim = simulator(seed=5, faults={"http_503": 0.5}, **LONG)
    url = sim.base_url
    client = clients(url)
    task = asyncio.create_task(client.generate([1], {"max_new_tokens": None}, rid))
    deadline = time.monotonic() + 5
    while sim.stats.running == 0:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    await client.abort(rid)
    result = await task
    assert (result.finish_reason, result.rid, result.attempts) == ("abort", retry_rid(rid, 1), 2)


async def test_cancelled_generate_leaks_no_connection(simulator, clients):
    sim = simulator(**LONG)
    url = sim.base_url
    client = clients(url, max_connections=1)
    rid = make_rid("run", "x", 0)
    task = asyncio.create_task(client.generate([1], {"max_new_tokens": None}, rid))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await client.abort(rid)  # the caller's duty after a cancel
    # the single pooled connection is free again: the next call gets through
    r = await asyncio.wait_for(client.generate([2], {"max_new_tokens": 3}, make_rid("run", "y", 0)), 5)
    assert r.finish_reason == "length"
    stats = sim.stats
    assert stats.aborted == 1 and stats.running == 0


async def test_retries_stop_at_the_time_bound(simulator, clients):
    sim = simulator(faults={"http_503": 1.0}, **FAST)
    url = sim.base_url
    policy = RetryPolicy(max_attempts=1000, base_delay_s=0.05, max_delay_s=0.05, max_elapsed_s=0.3, seed=0)
    started = time.monotonic()
    with pytest.raises(RequestFailed):
        await clients(url, retry=policy).generate([1], None, make_rid("run", "x", 0))
    assert time.monotonic() - started < 2 and 1 < sim.stats.faults["http_503"] < 1000


@pytest.mark.parametrize("abort_status", [400, 500])
async def test_abort_answered_with_an_error_is_an_abort_not_a_retry(simulator, clients, abort_status):
    sim = simulator(abort_status=abort_status, **LONG)
    url = sim.base_url
    result = await abort_one_in_flight(clients(url))
    assert (result.finish_reason, result.attempts) == ("abort", 1)
    assert sim.stats.requests == 1  # never resent


async def test_abort_during_backoff_stops_the_retries(simulator, clients):
    sim = simulator(faults={"http_503": 1.0}, **FAST)
    url = sim.base_url
    client = clients(url, retry=RetryPolicy(max_attempts=50, base_delay_s=0.3, max_delay_s=0.3, seed=1))
    rid = make_rid("run", "x", 0)
    task = asyncio.create_task(client.generate([1], None, rid))
    while sim.stats.faults["http_503"] == 0:
        await asyncio.sleep(0.01)
    await client.abort(rid)
    result = await task
    assert result.finish_reason == "abort" and sim.stats.faults["http_503"] <= 2


async def test_an_abort_dropped_before_the_server_registered_the_rid_is_sent_again(simulator, clients):
    # The request waits 0.4 s before the server holds its rid (the `slow` fault); an abort in that
    # time is dropped with a 200, as SGLang 0.5.23 drops it (tests/real_sglang/probes.py holds the
    # simulator to the real server there).
    sim = simulator(faults={"slow": 1.0, "slow_s": 0.4}, **LONG)
    client = clients(sim.base_url)
    rid = make_rid("run", "x", 0)
    task = asyncio.create_task(client.generate([1], {"max_new_tokens": None}, rid))
    await asyncio.sleep(0.1)
    await client.abort(rid)
    await asyncio.sleep(0.6)
    assert not task.done()  # the abort was dropped: the request runs on
    await client.abort(rid)  # the same abort, now that the rid is registered
    assert (await task).finish_reason == "abort"
    second = make_rid("run", "y", 0)
    task = asyncio.create_task(client.generate([1], {"max_new_tokens": None}, second))
    await asyncio.sleep(0.1)
    started = time.monotonic()
    await client.abort_until_answered(second, again_after_s=(0.5, 0.5))
    assert (await task).finish_reason == "abort" and time.monotonic() - started < 1.5
