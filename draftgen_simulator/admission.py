"""What the simulator admits: a /generate body -> its items, each planned, or SGLang's refusal.

Pure, in the order SGLang checks (docs/sglang.md#errors): the request's schema, the prompts, the
sampling params, the room each prompt leaves in the context, then duplicate rids.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Any

from draftgen_contracts.sglang_protocol import (
    SAMPLING_PARAM_DEFAULTS,
    InvalidSamplingParams,
    error_body,
    request_field_problem,
    validate_sampling_params,
)
from draftgen_simulator.config import SimConfig
from draftgen_simulator.http_layer import http_layer_problem
from draftgen_simulator.profiles import LengthProfile, get_profile, seeded_rng
from draftgen_simulator.responses import ids_digest, plan_response, response_token_ids, stop_at_token


@dataclass(frozen=True)
class Refusal:
    status: int
    body: dict[str, Any]


@dataclass(frozen=True)
class Item:
    """One prompt of a request, planned: it will emit `tokens` and end with `finish`."""
    rid: str
    prompt: list[int]
    tokens: int
    finish: dict[str, Any]
    token_key: int
    label: str = ""  # the request's "sim_label", for per-label counters


@dataclass(frozen=True)
class Admitted:
    items: list[Item]
    is_batch: bool
    stream: bool


def refuse(message: str, shape: str = "value", status: int = 400) -> Refusal:
    return Refusal(status, error_body(message, shape))


def admit(body: dict[str, Any], config: SimConfig, live: Container[str], new_rid: Callable[[], str],
          tokenize: Callable[[str], list[int]]) -> Admitted | Refusal:
    lax = http_layer_problem(body)
    if lax:
        return refuse(lax, "request")
    problem = request_field_problem(body)
    if problem:
        return refuse(problem, "schema")
    prompts = prompts_of(body, tokenize)
    if isinstance(prompts, Refusal):
        return prompts
    prompts, is_batch = prompts
    params = sampling_params_of(body, len(prompts))
    if isinstance(params, Refusal):
        return params
    rids = rids_of(body, len(prompts), is_batch, new_rid)
    if isinstance(rids, Refusal):
        return rids
    try:
        profile = get_profile(body.get("sim_profile") or config.profile)
    except ValueError as exc:
        return refuse(str(exc))
    items = []
    label = str(body.get("sim_label") or "")
    for rid, prompt, p in zip(rids, prompts, params):
        planned = plan_item(rid, prompt, p, profile, config, label)
        if isinstance(planned, Refusal):
            return planned
        items.append(planned)
    repeated = sorted({r for r in rids if rids.count(r) > 1})
    if repeated:
        return refuse(f"Duplicate request IDs detected within the request: {repeated}")
    duplicate = next((r for r in rids if r in live), None)
    if duplicate is not None:
        return refuse(f"Duplicate request ID detected: {duplicate}")
    return Admitted(items, is_batch, bool(body.get("stream")) and not is_batch)


def prompts_of(body: dict[str, Any], tokenize: Callable[[str], list[int]]) -> tuple[list[list[int]], bool] | Refusal:
    """The prompts of a body (input_ids, or text tokenized), and whether it is a batch."""
    if body.get("input_ids") is not None:
        raw = body["input_ids"]
        is_batch = isinstance(raw, list) and bool(raw) and isinstance(raw[0], list)
        prompts = raw if is_batch else [raw]
        if not all(isinstance(p, list) and all(isinstance(t, int) for t in p) for p in prompts):
            return refuse("input_ids must be a list of ints or a list of lists of ints", "request")
        if any(isinstance(t, bool) for p in prompts for t in p):  # an int to pydantic, not to the schema
            return refuse("input_ids: invalid type: boolean, expected a sequence", "schema")
    elif body.get("text") is not None:
        raw = body["text"]
        is_batch = isinstance(raw, list)
        prompts = [tokenize(t) for t in (raw if is_batch else [raw])]
    else:
        return refuse("Either text, input_ids or input_embeds should be provided.")
    if not prompts or any(len(p) == 0 for p in prompts):
        return refuse("The input_ids or text must not be empty.")
    return prompts, is_batch


def sampling_params_of(body: dict[str, Any], n: int) -> list[dict[str, Any]] | Refusal:
    """Each prompt's sampling params, checked as SGLang checks them."""
    given = body.get("sampling_params")
    params = given if isinstance(given, list) else [given] * n
    if len(params) != n:
        return refuse("The length of sampling_params must match the batch size.")
    try:
        checked = [validate_sampling_params(p) for p in params]
    except InvalidSamplingParams as exc:
        return refuse(exc.message, exc.shape)
    if any((p.get("n") or 1) != 1 for p in checked):
        return refuse("The simulator supports only n == 1.")  # SGLang serves n > 1; draftgen never asks
    return checked


def rids_of(body: dict[str, Any], n: int, is_batch: bool, new_rid: Callable[[], str]) -> list[str] | Refusal:
    rid = body.get("rid")
    if not is_batch:
        return [rid if rid is not None else new_rid()]
    if rid is None:
        return [new_rid() for _ in range(n)]
    if isinstance(rid, str):  # SGLang numbers one rid for the batch's items (io_struct `_normalize_rid`)
        return [f"{rid}_{i}" for i in range(n)]
    if not isinstance(rid, list):
        return refuse("The rid should be a string or a list of strings.")
    if len(rid) != n:
        return refuse("The specified rids length mismatch with the batch_size for batch processing.")
    return rid


def plan_item(rid: str, prompt: list[int], params: dict[str, Any], profile: LengthProfile,
              config: SimConfig, label: str = "") -> Item | Refusal:
    """How long the response to one prompt runs, or the refusal of a prompt with no room
    (docs/sglang.md#context-length)."""
    n_prompt, context = len(prompt), config.context_len
    max_new = params.get("max_new_tokens", SAMPLING_PARAM_DEFAULTS["max_new_tokens"])
    if n_prompt >= context:
        return refuse(f"The input ({n_prompt} tokens) is longer than the model's context length ({context} tokens).")
    if max_new is not None and n_prompt + max_new > context:
        return refuse(
            f"Requested token count exceeds the model's maximum context length of {context} tokens. You requested "
            f"a total of {n_prompt + max_new} tokens: {n_prompt} tokens from the input messages and {max_new} tokens "
            "for the completion. Please reduce the number of tokens in the input messages or the completion to fit "
            "within the limit.")
    rng = seeded_rng(config.seed, "length", profile.name, ids_digest(prompt), params.get("sampling_seed"))
    natural = max(profile.sample(rng), params.get("min_new_tokens") or 0)
    # The scheduler caps a request at max_req_len - prompt - 1, max_req_len being context - 1.
    room = context - 2 - n_prompt
    ignore_eos = bool(params.get("ignore_eos"))
    tokens, finish = plan_response(natural, max_new, room, ignore_eos, config.eos_token_id)
    key = rng.getrandbits(48)
    if params.get("stop_token_ids") and not ignore_eos:  # ignore_eos turns off every stop token
        ids = response_token_ids(key, tokens, config.vocab_size, config.eos_token_id, False)
        tokens, finish = stop_at_token(ids, params["stop_token_ids"], tokens, finish)
    return Item(rid, prompt, tokens, finish, key, label)
