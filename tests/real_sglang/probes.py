"""The requests of the differential contract test: each probe sends the same requests to whichever
server it is given (the real SGLang or the simulator) and returns what it observed, reduced to the
fields draftgen reads or the simulator sends, in a form that does not depend on the model's weights
(types, key sets, lengths, finish reasons; never the generated ids themselves).

A probe learns what it needs from the server it talks to: the stop-token probe first asks for a
greedy answer and then stops at one of that answer's own ids, so it means the same on both."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from tests.real_sglang.conftest import CONTEXT_LEN, MAX_QUEUED, MAX_RUNNING

Observation = dict[str, Any]
Probe = Callable[[httpx.AsyncClient], Awaitable[Observation]]

PROMPT = list(range(10, 26))
LONG = {"max_new_tokens": 1500, "ignore_eos": True}  # runs until aborted
# meta_info keys draftgen reads (draftgen_contracts.sglang_protocol) or the simulator sends.
WATCHED_META = ("id", "finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens", "e2e_latency")
RUNNING_SETTLE_S = 2.0  # time for the server to move requests it was sent into its running batch

PROBES: dict[str, Probe] = {}


def probe(fn: Probe) -> Probe:
    PROBES[fn.__name__] = fn
    return fn


def type_name(value: Any) -> str:
    return "number" if isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool)) \
        else type(value).__name__


def meta_view(meta: dict[str, Any]) -> dict[str, str]:
    return {k: type_name(meta[k]) for k in WATCHED_META if k in meta}


def answer_view(body: dict[str, Any]) -> Observation:
    """One /generate answer: its keys, meta_info's watched keys and their types, lengths, finish."""
    meta = body["meta_info"]
    ids = body["output_ids"]
    return {"keys": sorted(k for k in body if k in ("text", "output_ids", "meta_info")),
            "text": type_name(body["text"]), "meta": meta_view(meta), "finish": meta["finish_reason"],
            "output_len": len(ids), "completion_tokens_is_len": meta.get("completion_tokens") == len(ids),
            "prompt_tokens": meta.get("prompt_tokens")}


def error_view(response: httpx.Response) -> Observation:
    """A refusal: its status and which of SGLang's three body shapes (docs/sglang.md#errors)."""
    body = response.json()
    if isinstance(body.get("error"), str):
        shape = "flat"
    elif isinstance(body.get("error"), dict) and isinstance(body["error"].get("message"), str):
        shape = "nested"
    elif body.get("object") == "error":
        shape = "object"
    else:
        shape = f"unknown: {sorted(body)}"
    return {"status": response.status_code, "shape": shape}


async def generate(c: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await c.post("/generate", json=body)


async def ok(c: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    r = await generate(c, **body)
    assert r.status_code == 200, r.text
    return r.json()


# ---- answers ------------------------------------------------------------------------------------

@probe
async def length(c):
    return answer_view(await ok(c, input_ids=PROMPT, rid="diff-length",
                                sampling_params={"max_new_tokens": 7, "ignore_eos": True}))


@probe
async def default_max_new_tokens(c):
    return answer_view(await ok(c, input_ids=PROMPT, sampling_params={"ignore_eos": True}))


async def stop_at_own_id(c, ignore_eos: bool) -> Observation:
    """Greedy twice: the second time with one of the first answer's own ids as a stop token."""
    greedy = {"temperature": 0.0, "max_new_tokens": 12, "ignore_eos": ignore_eos}
    first = (await ok(c, input_ids=PROMPT, sampling_params=greedy))["output_ids"]
    stop_id = first[min(5, len(first) - 1)]
    body = await ok(c, input_ids=PROMPT, sampling_params={**greedy, "stop_token_ids": [stop_id]})
    view = answer_view(body)
    matched = view["finish"].get("matched")
    return {**view, "finish": {**view["finish"], **({"matched": "the stop id"} if matched == stop_id else {})},
            "ends_with_stop_id": body["output_ids"][-1] == stop_id,
            "output_len": "first occurrence + 1" if len(body["output_ids"]) == first.index(stop_id) + 1
            else len(body["output_ids"])}


@probe
async def stop_token(c):
    return await stop_at_own_id(c, ignore_eos=False)


@probe
async def ignore_eos_ignores_stop_token_ids(c):
    return await stop_at_own_id(c, ignore_eos=True)


@probe
async def stop_string(c):
    greedy = {"temperature": 0.0, "max_new_tokens": 30, "ignore_eos": True}
    text = (await ok(c, input_ids=PROMPT, sampling_params=greedy))["text"]
    stop = text[len(text) // 2:][:3]
    view = answer_view(await ok(c, input_ids=PROMPT, sampling_params={**greedy, "stop": [stop]}))
    return {**view, "output_len": "shorter" if view["output_len"] < 30 else view["output_len"],
            "finish": {**view["finish"], **({"matched": "the stop string"} if view["finish"].get("matched") == stop
                                            else {})}}


@probe
async def batch(c):
    body = await ok(c, input_ids=[PROMPT, PROMPT[:5]], rid=["diff-b0", "diff-b1"],
                    sampling_params={"max_new_tokens": 4, "ignore_eos": True})
    return {"is_list": isinstance(body, list), "answers": [answer_view(b) for b in body],
            "ids": [b["meta_info"]["id"] for b in body]}


@probe
async def batch_with_one_string_rid(c):
    r = await generate(c, input_ids=[PROMPT, PROMPT[:5]], rid="diff-one",
                       sampling_params={"max_new_tokens": 4, "ignore_eos": True})
    if r.status_code != 200:
        return error_view(r)
    return {"status": 200, "ids": [b["meta_info"]["id"] for b in r.json()]}


@probe
async def duplicate_rid(c):
    first = asyncio.create_task(generate(c, input_ids=PROMPT, rid="diff-dup", sampling_params=LONG))
    await asyncio.sleep(RUNNING_SETTLE_S)
    second = await generate(c, input_ids=PROMPT, rid="diff-dup", sampling_params={"max_new_tokens": 2})
    await c.post("/abort_request", json={"rid": "diff-dup"})
    return {"second": error_view(second), "first": (await first).json()["meta_info"]["finish_reason"]["type"]}


# ---- aborts -------------------------------------------------------------------------------------

@probe
async def abort_running(c):
    call = asyncio.create_task(generate(c, input_ids=PROMPT, rid="diff-running", sampling_params=LONG))
    await asyncio.sleep(RUNNING_SETTLE_S)
    aborted = await c.post("/abort_request", json={"rid": "diff-running"})
    r = await call
    view = answer_view(r.json())
    return {"abort_status": aborted.status_code, "status": r.status_code,
            **view, "output_len": "partial" if 0 < view["output_len"] < LONG["max_new_tokens"] else view["output_len"]}


@probe
async def abort_queued(c):
    running = [asyncio.create_task(generate(c, input_ids=PROMPT, rid=f"diff-hold-{i}", sampling_params=LONG))
               for i in range(MAX_RUNNING)]
    await asyncio.sleep(RUNNING_SETTLE_S)
    queued = asyncio.create_task(generate(c, input_ids=PROMPT, rid="diff-queued", sampling_params=LONG))
    await asyncio.sleep(RUNNING_SETTLE_S / 2)
    await c.post("/abort_request", json={"rid": "diff-queued"})
    body = (await queued).json()
    await c.post("/abort_request", json={"abort_all": True})
    await asyncio.gather(*running)
    return {"keys": sorted(body), "meta_keys": sorted(k for k in body["meta_info"] if k in WATCHED_META),
            "finish": body["meta_info"]["finish_reason"], "output_ids": body["output_ids"]}


@probe
async def abort_before_the_request(c):
    """An abort that reaches the server before its request is dropped with a 200: the request then
    runs to its end."""
    aborted = await c.post("/abort_request", json={"rid": "diff-early"})
    r = await generate(c, input_ids=PROMPT, rid="diff-early", sampling_params={"max_new_tokens": 8, "ignore_eos": True})
    view = answer_view(r.json())
    return {"abort_status": aborted.status_code, "finish": view["finish"], "output_len": view["output_len"]}


@probe
async def abort_twice_and_abort_all(c):
    """A second abort of an aborted rid, and an admin's abort_all of a running request: each answers
    200, and the aborted call answers in the same shape as one aborted by its rid."""
    by_rid = asyncio.create_task(generate(c, input_ids=PROMPT, rid="diff-twice", sampling_params=LONG))
    await asyncio.sleep(RUNNING_SETTLE_S)
    statuses = [(await c.post("/abort_request", json={"rid": "diff-twice"})).status_code for _ in range(2)]
    first = answer_view((await by_rid).json())
    by_all = asyncio.create_task(generate(c, input_ids=PROMPT, rid="diff-all", sampling_params=LONG))
    await asyncio.sleep(RUNNING_SETTLE_S)
    statuses.append((await c.post("/abort_request", json={"abort_all": True})).status_code)
    second = answer_view((await by_all).json())
    partial = {"output_len": "partial"}
    return {"statuses": statuses, "by_rid": {**first, **partial}, "by_abort_all": {**second, **partial},
            "both_partial": all(0 < v["output_len"] < LONG["max_new_tokens"] for v in (first, second))}


@probe
async def abort_unknown_rid(c):
    r = await c.post("/abort_request", json={"rid": "diff-nobody"})
    return {"status": r.status_code, "body": r.text}


@probe
async def abort_all_when_idle(c):
    r = await c.post("/abort_request", json={"abort_all": True})
    return {"status": r.status_code, "body": r.text}


@probe
async def full_queue(c):
    held = [asyncio.create_task(generate(c, input_ids=PROMPT, rid=f"diff-full-{i:03d}", sampling_params=LONG))
            for i in range(MAX_RUNNING)]
    await asyncio.sleep(RUNNING_SETTLE_S)
    held += [asyncio.create_task(generate(c, input_ids=PROMPT, rid=f"diff-full-{i:03d}", sampling_params=LONG))
             for i in range(MAX_RUNNING, MAX_RUNNING + MAX_QUEUED)]
    await asyncio.sleep(RUNNING_SETTLE_S)
    refused = await generate(c, input_ids=PROMPT, rid="diff-full-one-more", sampling_params=LONG)
    await c.post("/abort_request", json={"abort_all": True})
    answers = await asyncio.gather(*held)
    body = refused.json()
    return {**error_view(refused), "message": body.get("message"), "type": body.get("type"),
            "code": body.get("code"), "held": sorted({a.status_code for a in answers})}


# ---- refusals -----------------------------------------------------------------------------------

WRONG = {
    "temperature_string": {"input_ids": PROMPT, "sampling_params": {"temperature": "0.7"}},
    "max_new_tokens_float": {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 16.0}},
    "input_ids_strings": {"input_ids": ["a", "b"]},
    "unknown_sampling_key": {"input_ids": PROMPT, "sampling_params": {"max_tokens": 10}},
    "top_p_out_of_range": {"input_ids": PROMPT, "sampling_params": {"top_p": 1.5}},
    "no_prompt": {"sampling_params": {"max_new_tokens": 2}},
    "empty_input_ids": {"input_ids": [], "sampling_params": {"max_new_tokens": 2}},
    "batch_rids_wrong_length": {"input_ids": [[1], [2]], "rid": ["diff-w0"]},
    "batch_rid_a_number": {"input_ids": [[1], [2]], "rid": 7},
    "batch_repeats_a_rid": {"input_ids": [[1], [2]], "rid": ["diff-r", "diff-r"]},
    "prompt_past_context": {"input_ids": [5] * CONTEXT_LEN},
    "prompt_and_max_new_past_context": {"input_ids": [5] * (CONTEXT_LEN - 10), "sampling_params": {"max_new_tokens": 11}},
}


@probe
async def refusals(c):
    return {name: error_view(await generate(c, **body)) for name, body in WRONG.items()}


TOP_LEVEL = {
    "rid_a_number": {"rid": 7}, "stream_a_string": {"stream": "true"}, "stream_not_a_bool": {"stream": "maybe"},
    "stream_one": {"stream": 1}, "return_logprob_yes": {"return_logprob": "yes"}, "text_a_number": {"text": 5},
    "priority_a_numeric_string": {"priority": "3"}, "priority_a_fraction": {"priority": 1.5},
    "custom_labels_not_strings": {"custom_labels": {"a": 1}}, "routing_key_a_number": {"routing_key": 5},
    "sampling_params_a_string": {"sampling_params": "x"}, "input_ids_a_string": {"input_ids": "abc"},
    "input_ids_floats": {"input_ids": [1.5]}, "input_ids_bools": {"input_ids": [True]},
}


@probe
async def top_level_types(c):
    """Which layer refuses a wrong top-level type: the HTTP layer's lax validation (object shape) or
    the request schema after it (flat)."""
    return {name: error_view(await generate(c, **{"input_ids": [1], **fields}))
            for name, fields in TOP_LEVEL.items()}


@probe
async def unreadable_bodies(c):
    seen = {}
    for name, content in (("not_json", b"notjson"), ("not_an_object", b"[1, 2]")):
        r = await c.post("/generate", content=content, headers={"Content-Type": "application/json"})
        seen[name] = error_view(r)
    return seen


@probe
async def unknown_top_level_field(c):
    body = await ok(c, input_ids=PROMPT, whatever={"x": 1}, sampling_params={"max_new_tokens": 3, "ignore_eos": True})
    return answer_view(body)


@probe
async def context_boundary(c):
    """A prompt that leaves exactly max_new_tokens of room is admitted; what it is allowed to make."""
    prompt = [5] * (CONTEXT_LEN - 10)
    body = await ok(c, input_ids=prompt, sampling_params={"max_new_tokens": 10, "ignore_eos": True})
    return {"finish": body["meta_info"]["finish_reason"], "output_len": len(body["output_ids"])}


# ---- streaming ----------------------------------------------------------------------------------

@probe
async def streaming(c):
    """How many events a stream has depends on load on both servers (docs/sglang.md#streaming):
    only that it has several, each cumulative, is compared."""
    events = []
    async with c.stream("POST", "/generate", json={"input_ids": PROMPT, "stream": True, "rid": "diff-stream",
                                                   "sampling_params": {"max_new_tokens": 40, "ignore_eos": True}}) as r:
        content_type = r.headers["content-type"].split(";")[0]
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                events.append(line[len("data: "):])
    parsed = [json.loads(e) for e in events[:-1]]
    cumulative = all(b["output_ids"][:len(a["output_ids"])] == a["output_ids"] for a, b in zip(parsed, parsed[1:]))
    return {"status": r.status_code, "content_type": content_type, "last": events[-1], "cumulative": cumulative,
            "finish_only_last": all(p["meta_info"]["finish_reason"] is None for p in parsed[:-1]),
            "final": answer_view(parsed[-1]), "several_events": len(parsed) >= 3}


# ---- the other routes ---------------------------------------------------------------------------

@probe
async def routes(c):
    seen = {}
    for path in ("/health", "/health_generate", "/ready", "/v1/models", "/server_info", "/get_server_info",
                 "/model_info", "/get_model_info", "/metrics"):
        r = await c.get(path)
        seen[path] = r.status_code
    return seen


@probe
async def ready_body(c):
    return {"body": (await c.get("/ready")).text}


@probe
async def model_list(c):
    card = (await c.get("/v1/models")).json()["data"][0]
    return {"max_model_len": card["max_model_len"], "id_is_str": isinstance(card["id"], str)}


@probe
async def server_info(c):
    info = (await c.get("/server_info")).json()
    return {k: type_name(info.get(k)) for k in ("version", "model_path", "context_length", "max_running_requests",
                                                 "max_queued_requests")}


@probe
async def model_info(c):
    info = (await c.get("/model_info")).json()
    return {k: type_name(info.get(k)) for k in ("model_path", "is_generation", "weight_version")}


@probe
async def metrics(c):
    text = (await c.get("/metrics")).text
    names = ("sglang:generation_tokens_total", "sglang:prompt_tokens_total", "sglang:num_running_reqs",
             "sglang:num_queue_reqs")
    return {name: any(line.startswith(name + "{") for line in text.splitlines()) for name in names}
