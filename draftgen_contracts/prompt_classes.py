"""The default prompt-class table: the one the API defaults to and jobrunner falls back on.

Prompts are classed by length so that long prompts, which need more KV cache each, run fewer at a
time. The numbers are the reference run's: short prompts at 150 in flight with 10,240 new tokens,
long ones at 32 with 16,384, for a 16,384-token context. "Short" is up to 2,048 prompt tokens, so
a short prompt and its longest response (2,048 + 10,240) fit the context with room to spare.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PromptClass:
    """Prompts up to `max_prompt_tokens` (None: any length) run `concurrency` at a time, each asking
    for up to `max_new_tokens`."""

    name: str
    max_prompt_tokens: int | None
    concurrency: int
    max_new_tokens: int


DEFAULT_PROMPT_CLASSES = (
    PromptClass("short", max_prompt_tokens=2048, concurrency=150, max_new_tokens=10_240),
    PromptClass("long", max_prompt_tokens=None, concurrency=32, max_new_tokens=16_384),
)
