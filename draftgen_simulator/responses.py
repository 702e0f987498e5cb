"""The simulator's pure decisions: how fast, how long, which tokens, which fault, which body."""

from __future__ import annotations

import array
import hashlib
from typing import Any

from draftgen_simulator.config import FAULT_NAMES, FaultRates, SimConfig, SimStats
from draftgen_simulator.profiles import seeded_rng


def choose_fault(rates: FaultRates, u: float) -> str | None:
    """The fault for a request whose uniform draw is `u` in [0, 1): the rates are stacked in
    FAULT_NAMES order; past their sum, none."""
    edge = 0.0
    for name in FAULT_NAMES:
        edge += getattr(rates, name)
        if u < edge:
            return name
    return None


def fault_for(config: SimConfig, key: str) -> str | None:
    """The fault injected into the /generate request keyed `key` (its first rid): a function of the
    seed and the rid only, so a run replays the same faults whatever the arrival order."""
    return choose_fault(config.faults, seeded_rng(config.seed, "fault", key).random())


def per_request_rate(per_request_tps: float, capacity_tps: float, running: int) -> float:
    """Tokens/s each running request gets: its own speed, unless the shared capacity is less."""
    if running <= 0:
        return 0.0
    return min(per_request_tps, capacity_tps / running)


def plan_response(natural_len: int, max_new_tokens: int | None, room: int, ignore_eos: bool,
                  eos_token_id: int) -> tuple[int, dict[str, Any]]:
    """(tokens to emit, finish_reason) for a response that would naturally end after `natural_len`
    tokens (EOS included), given max_new_tokens (None: up to the context) and the room left."""
    limit = room if max_new_tokens is None else min(max_new_tokens, room)
    if ignore_eos or natural_len > limit:
        return limit, {"type": "length", "length": limit}
    return natural_len, {"type": "stop", "matched": eos_token_id}


def stop_at_token(ids: list[int], stop_token_ids: list[int], tokens: int, finish: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(tokens, finish_reason) of a response whose stand-in `ids` would run `tokens` long: cut at
    the first stop token, which it keeps, as SGLang's `_check_token_based_finish` does."""
    stop = set(stop_token_ids)
    at = next((i for i, t in enumerate(ids) if t in stop), None)
    if at is None:
        return tokens, finish
    return at + 1, {"type": "stop", "matched": ids[at]}


def response_token_ids(key: int, n: int, vocab_size: int, eos_token_id: int, ends_with_eos: bool) -> list[int]:
    """Deterministic stand-in token ids; only the last may be EOS, and only if it stops there."""
    span = max(1, vocab_size - 3)
    step = 2 * (key % 7919) + 1  # odd, so it walks the whole range
    ids = [3 + (key + i * step) % span for i in range(n)]
    ids = [t if t != eos_token_id else 3 + (t + 1 - 3) % span for t in ids]
    if ends_with_eos and n:
        ids[-1] = eos_token_id
    return ids


def prefix_matches(rid: str, given: str) -> bool:
    """SGLang's scheduler aborts every request whose rid starts with the given one
    (docs/sglang.md#abort-by-rid-prefix)."""
    return rid.startswith(given)


def ids_digest(ids: list[int]) -> str:
    return hashlib.sha256(array.array("q", ids).tobytes()).hexdigest()


def response_body(rid: str, prompt_tokens: int, output_ids: list[int], finish: dict | None,
                  e2e_latency: float) -> dict[str, Any]:
    """A /generate response object (docs/sglang.md#the-response)."""
    return {"text": f"[simulated response: {len(output_ids)} tokens]", "output_ids": output_ids,
            "meta_info": {"id": rid, "finish_reason": finish, "prompt_tokens": prompt_tokens,
                          "completion_tokens": len(output_ids), "cached_tokens": 0, "e2e_latency": e2e_latency}}


def queued_abort_body(rid: str, e2e_latency: float) -> dict[str, Any]:
    """What a request aborted while still queued answers: no tokens, fewer meta_info keys (no
    prompt_tokens)."""
    return {"text": "", "output_ids": [],
            "meta_info": {"id": rid, "finish_reason": {"type": "abort", "message": "Abort in waiting queue"},
                          "completion_tokens": 0, "e2e_latency": e2e_latency}}


# (name, Prometheus type, help, the SimStats field it reports): the part of SGLang's
# `--enable-metrics` exposition (srt/observability/metrics_collector.py) that draftgen's tests read.
METRICS = (
    ("sglang:generation_tokens_total", "counter", "Number of generation tokens processed.", "tokens_generated_total"),
    ("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.", "prompt_tokens_total"),
    ("sglang:num_requests_total", "counter", "Number of requests processed.", "requests"),
    ("sglang:num_aborted_requests_total", "counter", "Number of requests aborted.", "aborted"),
    ("sglang:num_running_reqs", "gauge", "The number of running requests.", "running"),
    ("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", "queued"),
)


def metrics_text(stats: SimStats, model_name: str) -> str:
    """/metrics in Prometheus' text format, with SGLang's names and its `model_name` label."""
    lines = []
    for name, kind, help_text, field in METRICS:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}",
                  f'{name}{{engine_type="unified",model_name="{model_name}"}} {float(getattr(stats, field))}']
    return "\n".join(lines) + "\n"
