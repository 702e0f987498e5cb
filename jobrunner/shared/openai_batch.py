"""OpenAI batch request rows, the interchange format of batch runners (vLLM's run-batch, LiteLLM):

    {"custom_id": "req-1", "method": "POST", "url": "/v1/chat/completions",
     "body": {"model": "m", "messages": [...], "tools": [...], "temperature": 0.7, "max_tokens": 512}}

A row's `custom_id` is its source id, its body's `messages` and `tools` its conversation. Only chat
completions make a prompt: a row for another endpoint (completions, embeddings) is skipped as
`unsupported_request`.

What else the body asks for is not honoured, and counted by name (the preflight's `ignored_fields`):
draftgen samples a dataset one way, its `sampling_params` and `max_new_tokens` (a prompt class's),
because the budget, the length model that plans it and the provenance of the corpus are per dataset;
per-row temperatures or limits would make each of them per row. `model` names whoever was to answer
and the run's model answers; `n` is one response per row here; `stream`, `user`, `metadata` say
nothing about the response.
"""

from __future__ import annotations

from typing import Any

from jobrunner.shared.row_error import RowError

CHAT_URLS = ("/v1/chat/completions", "/chat/completions")
USED = ("messages", "tools")


def is_batch_request(obj: dict) -> bool:
    return isinstance(obj.get("body"), dict) and ("custom_id" in obj or "url" in obj)


def batch_request(obj: dict) -> tuple[Any, Any, Any, tuple[str, ...]]:
    """(messages, tools, custom_id, the body's fields not honoured) of a chat completions request."""
    url, method = obj.get("url", CHAT_URLS[0]), obj.get("method", "POST")
    if url not in CHAT_URLS or str(method).upper() != "POST":
        raise RowError("unsupported_request", f"{method} {url}: only POST {CHAT_URLS[0]} makes a prompt")
    body = obj["body"]
    ignored = tuple(sorted(f"body.{k}" for k, v in body.items() if k not in USED and v is not None))
    return body.get("messages"), body.get("tools"), obj.get("custom_id"), ignored
