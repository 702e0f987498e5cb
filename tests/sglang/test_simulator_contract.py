"""The simulator answers like SGLang's native HTTP server (docs/sglang.md)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

FAST = dict(per_request_tps=5000.0, capacity_tps=1e6, tick_s=0.005)


async def _post(url, body, timeout=10.0):
    async with httpx.AsyncClient(base_url=url, timeout=timeout) as c:
        return await c.post("/generate", json=body)


async def test_generate_stops_with_eos_included(simulator):
    url = simulator(profile="fixed:20", eos_token_id=5, **FAST).base_url
    r = await _post(url, {"input_ids": [11, 12, 13], "sampling_params": {"max_new_tokens": 100}, "rid": "a"})
    assert r.status_code == 200
    body = r.json()
    meta = body["meta_info"]
    assert meta["finish_reason"] == {"type": "stop", "matched": 5}
    assert body["output_ids"][-1] == 5 and len(body["output_ids"]) == meta["completion_tokens"] == 20
    assert (meta["id"], meta["prompt_tokens"], meta["cached_tokens"]) == ("a", 3, 0)
    assert meta["e2e_latency"] > 0 and isinstance(body["text"], str)


async def test_generate_hits_max_new_tokens(simulator):
    url = simulator(profile="fixed:50", **FAST).base_url
    body = (await _post(url, {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 7}})).json()
    assert body["meta_info"]["finish_reason"] == {"type": "length", "length": 7}
    assert len(body["output_ids"]) == 7 and 2 not in body["output_ids"]


async def test_default_max_new_tokens_is_128_and_top_level_unknowns_are_ignored(simulator):
    url = simulator(profile="fixed:1000", **FAST).base_url
    body = (await _post(url, {"input_ids": [1], "whatever": {"x": 1}, "return_logprob": False})).json()
    assert body["meta_info"]["finish_reason"] == {"type": "length", "length": 128}


@pytest.mark.parametrize(
    "sampling_params, shape",
    [
        ({"max_tokens": 10}, "flat"),
        ({"seed": 1}, "flat"),
        ({"temperature": "0.7"}, "flat"),  # 0.5.23's request schema refuses a wrong type
        ({"max_new_tokens": 16.0}, "flat"),
        ({"top_p": 1.5}, "nested"),
        ({"max_new_tokens": 100}, "nested"),  # prompt 30 + 100 > context 64
        ({"max_new_tokens": 35}, "nested"),  # prompt 30 + 35 > context 64 (== is admitted since 0.5.2x)
    ],
)
async def test_bad_requests_get_sglangs_400_shapes(simulator, sampling_params, shape):
    sim = simulator(context_len=64, **FAST)
    url = sim.base_url
    r = await _post(url, {"input_ids": list(range(30)), "sampling_params": sampling_params})
    assert r.status_code == 400
    body = r.json()
    if shape == "flat":
        assert isinstance(body["error"], str) and next(iter(sampling_params)) in body["error"]
    elif shape == "object":
        assert body["object"] == "error" and body["code"] == 400 and isinstance(body["message"], str)
    else:
        assert isinstance(body["error"]["message"], str)
    assert sim.stats.rejected == 1 and sim.stats.requests == 0


async def test_duplicate_running_rid_is_a_400(simulator):
    url = simulator(profile="fixed:100000", per_request_tps=50, context_len=200_000).base_url
    async with httpx.AsyncClient(base_url=url, timeout=10) as c:
        first = asyncio.create_task(c.post("/generate", json={"input_ids": [1], "rid": "dup", "sampling_params": {"max_new_tokens": None}}))
        await asyncio.sleep(0.1)
        r = await c.post("/generate", json={"input_ids": [1], "rid": "dup"})
        assert r.status_code == 400 and "dup" in r.json()["error"]["message"]
        await c.post("/abort_request", json={"rid": "dup"})
        assert (await first).json()["meta_info"]["finish_reason"]["type"] == "abort"


async def test_batch_and_text_inputs(simulator):
    url = simulator(profile="fixed:4", **FAST).base_url
    r = await _post(url, {"input_ids": [[1, 2], [3, 4, 5]], "rid": ["b0", "b1"], "sampling_params": {"max_new_tokens": 9}})
    body = r.json()
    assert isinstance(body, list) and [b["meta_info"]["id"] for b in body] == ["b0", "b1"]
    assert [b["meta_info"]["prompt_tokens"] for b in body] == [2, 3]
    r = await _post(url, {"text": ["hello", "hi"], "sampling_params": [{"max_new_tokens": 2}, {"max_new_tokens": 3}]})
    assert [b["meta_info"]["completion_tokens"] for b in r.json()] == [2, 3]
    r = await _post(url, {"text": "hello there"})
    assert r.json()["meta_info"]["prompt_tokens"] > 0
    r = await _post(url, {"input_ids": [[1], [2]], "rid": "one"})  # SGLang numbers a batch's one rid
    assert [b["meta_info"]["id"] for b in r.json()] == ["one_0", "one_1"]
    r = await _post(url, {"input_ids": [[1], [2]], "rid": ["only-one"]})
    assert r.status_code == 400


async def test_streaming_is_cumulative_and_ends_with_done(simulator):
    url = simulator(profile="fixed:60", per_request_tps=600, tick_s=0.01).base_url
    events = []
    async with httpx.AsyncClient(base_url=url, timeout=10) as c:
        async with c.stream("POST", "/generate", json={"input_ids": [1, 2], "stream": True, "rid": "s"}) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    events.append(line[len("data: "):])
    assert events[-1] == "[DONE]"
    parsed = [json.loads(e) for e in events[:-1]]
    assert len(parsed) >= 3
    for earlier, later in zip(parsed, parsed[1:]):
        assert later["output_ids"][: len(earlier["output_ids"])] == earlier["output_ids"]
    assert all(p["meta_info"]["finish_reason"] is None for p in parsed[:-1])
    assert parsed[-1]["meta_info"]["finish_reason"]["type"] == "stop" and len(parsed[-1]["output_ids"]) == 60


async def test_abort_matches_rids_by_prefix(simulator):
    sim = simulator(profile="fixed:100000", per_request_tps=200, context_len=200_000)
    url = sim.base_url
    async with httpx.AsyncClient(base_url=url, timeout=10) as c:
        tasks = {rid: asyncio.create_task(c.post("/generate", json={"input_ids": [1], "rid": rid, "sampling_params": {"max_new_tokens": None}}))
                 for rid in ("job1", "job10", "job2")}
        await asyncio.sleep(0.3)
        assert (await c.post("/abort_request", json={"rid": "job1"})).status_code == 200
        for rid in ("job1", "job10"):
            body = (await tasks[rid]).json()
            assert body["meta_info"]["finish_reason"]["type"] == "abort"
            assert len(body["output_ids"]) == body["meta_info"]["completion_tokens"] > 0  # partial output
        await asyncio.sleep(0.05)
        assert not tasks["job2"].done()
        await c.post("/abort_request", json={"abort_all": True})
        assert (await tasks["job2"]).json()["meta_info"]["finish_reason"]["type"] == "abort"
    assert sim.stats.aborted == 3 and sim.stats.tokens_generated_after_abort == 0


async def test_abort_of_a_queued_request(simulator):
    sim = simulator(profile="fixed:100000", per_request_tps=100, max_running_requests=1, context_len=200_000)
    async with httpx.AsyncClient(base_url=sim.base_url, timeout=10) as c:
        run = asyncio.create_task(c.post("/generate", json={"input_ids": [1], "rid": "run", "sampling_params": {"max_new_tokens": None}}))
        while sim.stats.running < 1:  # "run" holds the one slot before "wait" arrives
            await asyncio.sleep(0.01)
        waiting = asyncio.create_task(c.post("/generate", json={"input_ids": [1], "rid": "wait"}))
        while sim.stats.queued < 1:
            await asyncio.sleep(0.01)
        await c.post("/abort_request", json={"rid": "wait"})
        body = (await waiting).json()
        assert body["meta_info"]["finish_reason"] == {"type": "abort", "message": "Abort in waiting queue"}
        assert body["output_ids"] == []
        await c.post("/abort_request", json={"abort_all": True})
        await run


async def test_port_refuses_until_loaded_then_ready_after_warmup(simulator):
    sim = simulator(startup_delay_s=0.6, warmup_s=0.5, **FAST)
    url = sim.base_url
    async with httpx.AsyncClient(base_url=url, timeout=2) as c:
        with pytest.raises(httpx.ConnectError):
            await c.get("/ready")
        deadline = time.monotonic() + 5
        while True:
            try:
                r = await c.get("/ready")
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
        assert r.status_code == 503
        assert (await c.get("/health_generate")).status_code == 503
        assert (await c.get("/health")).status_code == 503
        await asyncio.sleep(0.6)
        assert (await c.get("/ready")).status_code == 200
        assert (await c.get("/health_generate")).status_code == 200


async def test_info_endpoints(simulator):
    url = simulator(context_len=4096, model_path="org/tiny", max_running_requests=7).base_url
    async with httpx.AsyncClient(base_url=url, timeout=2) as c:
        models = (await c.get("/v1/models")).json()
        assert models["data"][0]["id"] == "org/tiny" and models["data"][0]["max_model_len"] == 4096
        info = (await c.get("/server_info")).json()
        # context_length is the launch flag, unset (null) unless given (the served length is max_model_len)
        assert info["max_running_requests"] == 7 and info["context_length"] is None
        assert (await c.get("/get_server_info")).json()["model_path"] == "org/tiny"
        assert (await c.get("/get_model_info")).json()["is_generation"] is True
        assert (await c.get("/model_info")).json()["model_path"] == "org/tiny"
        metrics = (await c.get("/metrics")).text
        assert 'sglang:generation_tokens_total{engine_type="unified",model_name="org/tiny"} 0.0' in metrics


@pytest.mark.parametrize("fault, status", [("http_500", 500), ("http_503", 503)])
async def test_status_faults(simulator, fault, status):
    sim = simulator(faults={fault: 1.0}, **FAST)
    url = sim.base_url
    r = await _post(url, {"input_ids": [1]})
    assert r.status_code == status and r.json()["object"] == "error"
    assert sim.stats.faults[fault] == 1 and sim.stats.requests == 0


async def test_reset_fault_closes_the_connection(simulator):
    url = simulator(faults={"reset": 1.0}, **FAST).base_url
    with pytest.raises(httpx.TransportError):
        await _post(url, {"input_ids": [1]})


async def test_timeout_fault_hangs_until_the_client_gives_up(simulator):
    sim = simulator(faults={"timeout": 1.0}, **FAST)
    url = sim.base_url
    with pytest.raises(httpx.ReadTimeout):
        await _post(url, {"input_ids": [1]}, timeout=0.3)
    assert sim.stats.faults["timeout"] == 1


async def test_slow_fault_delays_the_answer(simulator):
    sim = simulator(faults={"slow": 1.0, "slow_s": 0.3}, profile="fixed:3", **FAST)
    url = sim.base_url
    started = time.monotonic()
    r = await _post(url, {"input_ids": [1]})
    assert r.status_code == 200 and time.monotonic() - started >= 0.3
    assert sim.stats.faults["slow"] == 1


async def test_faults_are_drawn_from_the_seed_and_rid(simulator):
    outcomes = []
    for _ in range(2):
        url = simulator(seed=3, faults={"http_503": 0.5}, profile="fixed:2", **FAST).base_url
        outcomes.append([(await _post(url, {"input_ids": [1], "rid": f"r{i}"})).status_code for i in range(12)])
    assert outcomes[0] == outcomes[1] and {200, 503} == set(outcomes[0])


async def test_same_seed_same_responses_other_seed_differs(simulator):
    results = {}
    for seed in (1, 1, 2):
        url = simulator(seed=seed, profile="chat", per_request_tps=1e6, capacity_tps=1e7, tick_s=0.005).base_url
        outs = [(await _post(url, {"input_ids": [i, 7, 9], "sampling_params": {"max_new_tokens": 16000 - 3 - 2000}})).json()
                for i in range(5)]
        results.setdefault(seed, []).append([o["output_ids"] for o in outs])
    assert results[1][0] == results[1][1]
    assert [len(o) for o in results[1][0]] != [len(o) for o in results[2][0]]


async def test_profile_hint_per_request(simulator):
    url = simulator(profile="fixed:5", **FAST).base_url
    body = (await _post(url, {"input_ids": [1], "sim_profile": "fixed:9"})).json()
    assert body["meta_info"]["completion_tokens"] == 9
    assert (await _post(url, {"input_ids": [1], "sim_profile": "bogus"})).status_code == 400


async def test_capacity_is_shared_and_running_is_capped(simulator):
    # 12 x 100 tokens at 1500 tokens/s of capacity: at least 0.8 s whatever the client does
    sim = simulator(profile="fixed:100", per_request_tps=1e5, capacity_tps=1500, max_running_requests=4, tick_s=0.01)
    url = sim.base_url
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        rs = await asyncio.gather(*(c.post("/generate", json={"input_ids": [i]}) for i in range(12)))
    elapsed = time.monotonic() - started
    assert all(r.json()["meta_info"]["completion_tokens"] == 100 for r in rs)
    assert 0.75 <= elapsed < 10
    stats = sim.stats
    assert stats.max_running == 4 and stats.completed == 12 and stats.tokens_generated_total == 1200


async def test_full_queue_answers_503(simulator):
    url = simulator(profile="fixed:100000", per_request_tps=10, max_running_requests=1, max_queued_requests=1, context_len=200_000).base_url
    async with httpx.AsyncClient(base_url=url, timeout=10) as c:
        a = asyncio.create_task(c.post("/generate", json={"input_ids": [1], "rid": "a", "sampling_params": {"max_new_tokens": None}}))
        await asyncio.sleep(0.1)
        b = asyncio.create_task(c.post("/generate", json={"input_ids": [1], "rid": "b"}))
        await asyncio.sleep(0.1)
        r = await c.post("/generate", json={"input_ids": [1], "rid": "c"})
        assert r.status_code == 503 and r.json()["code"] == 503
        await c.post("/abort_request", json={"abort_all": True})
        await asyncio.gather(a, b)


async def test_disconnect_is_noticed_only_at_the_poll_and_its_tokens_are_waste(simulator):
    sim = simulator(profile="fixed:100000", per_request_tps=1000, disconnect_poll_s=0.5, context_len=200_000)
    url = sim.base_url
    async with httpx.AsyncClient(base_url=url, timeout=10) as c:
        task = asyncio.create_task(c.post("/generate", json={"input_ids": [1], "rid": "gone", "sampling_params": {"max_new_tokens": None}}))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        deadline = time.monotonic() + 3
        while sim.stats.aborted == 0:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    stats = sim.stats
    assert stats.running == 0 and stats.tokens_generated_after_abort > 0


def test_cli_serves_until_sigterm(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobrunner.cli", "simulate", "--port", "0", "--profile", "fixed:3", "--context-len", "2048"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{url}/v1/models").json()["data"][0]["max_model_len"] == 2048
        body = httpx.post(f"{url}/generate", json={"input_ids": [1]}).json()
        assert body["meta_info"]["completion_tokens"] == 3
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_run_in_thread_serves_sync_callers():
    from draftgen_simulator.config import SimConfig
    from draftgen_simulator.server import run_in_thread

    url, handle = run_in_thread(SimConfig(profile="fixed:4", **FAST))
    try:
        body = httpx.post(f"{url}/generate", json={"input_ids": [1, 2]}, timeout=5).json()
        assert body["meta_info"]["completion_tokens"] == 4
        assert handle.stats.completed == 1
    finally:
        handle.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/health", timeout=2)


async def test_speedup_scales_simulated_time(simulator):
    # 1000 tokens at 100 tokens/s is 10 s of simulated time; 50x faster is 0.2 s
    url = simulator(profile="fixed:1000", per_request_tps=100, speedup=50).base_url
    started = time.monotonic()
    body = (await _post(url, {"input_ids": [1], "sampling_params": {"max_new_tokens": 2000}})).json()
    assert body["meta_info"]["completion_tokens"] == 1000 and time.monotonic() - started < 3


async def test_context_boundary_and_null_max_new_tokens(simulator):
    url = simulator(context_len=64, profile="fixed:1000", **FAST).base_url
    # The scheduler caps a request at context - prompt - 2 (docs/sglang.md#context-length): 33 asked, 32 made.
    r = await _post(url, {"input_ids": list(range(30)), "sampling_params": {"max_new_tokens": 33}})
    assert r.status_code == 200 and r.json()["meta_info"]["finish_reason"] == {"type": "length", "length": 32}
    r = await _post(url, {"input_ids": list(range(30)), "sampling_params": {"max_new_tokens": None}})
    assert r.json()["meta_info"]["completion_tokens"] == 64 - 2 - 30
    r = await _post(url, {"input_ids": list(range(64))})
    assert r.status_code == 400 and "longer than the model's context length" in r.json()["error"]["message"]


async def test_abort_needs_an_exact_rid_to_reach_the_prefix_match(simulator):
    sim = simulator(profile="fixed:100000", per_request_tps=200, context_len=200_000)
    url = sim.base_url
    async with httpx.AsyncClient(base_url=url, timeout=10) as c:
        task = asyncio.create_task(c.post("/generate", json={"input_ids": [1], "rid": "job10", "sampling_params": {"max_new_tokens": None}}))
        await asyncio.sleep(0.2)
        await c.post("/abort_request", json={"rid": "job"})  # no request is called exactly "job"
        await asyncio.sleep(0.1)
        assert not task.done() and sim.stats.aborted == 0
        await c.post("/abort_request", json={"rid": "job10"})
        assert (await task).json()["meta_info"]["finish_reason"]["type"] == "abort"


async def test_abort_answered_with_an_error_status_like_some_versions(simulator):
    url = simulator(abort_status=400, profile="fixed:100000", per_request_tps=200, context_len=200_000).base_url
    async with httpx.AsyncClient(base_url=url, timeout=10) as c:
        task = asyncio.create_task(c.post("/generate", json={"input_ids": [1], "rid": "r", "sampling_params": {"max_new_tokens": None}}))
        await asyncio.sleep(0.2)
        await c.post("/abort_request", json={"rid": "r"})
        r = await task
        assert r.status_code == 400 and "Abort" in r.json()["error"]["message"]
