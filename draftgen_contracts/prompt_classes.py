"""Prompt classes: the one model of a class (the spec's `promptClasses[]`, the generate config's
`prompt_classes`, what jobrunner classes prompts by) and the default table.

Prompts are classed by length so that long prompts, which need more KV cache each, run fewer at a
time. The defaults are the reference run's: short prompts at 150 in flight with 10,240 new tokens,
long ones at 32 with 16,384, for a 16,384-token context. "Short" is up to 2,048 prompt tokens, so
a short prompt and its longest response (2,048 + 10,240) fit the context with room to spare.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class PromptClass(BaseModel):
    """A class of prompts by length, with its own concurrency and max_new_tokens."""

    # camelCase in the spec, snake_case in the generate config: both parse, each writer dumps its own.
    # Frozen: the default table is shared by every spec that does not set its own.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,15}$")
    max_prompt_tokens: int | None = Field(None, ge=1, description="Prompts up to this length; unset: the rest.")
    concurrency: int = Field(ge=1, le=4096, description="Requests in flight per replica for this class.")
    max_new_tokens: int = Field(ge=1, description="max_new_tokens for this class's prompts.")


def has_one_catch_all(classes: Iterable[PromptClass]) -> bool:
    """Exactly one class has no max_prompt_tokens: it takes the longest prompts, so every prompt
    has a class and no two classes compete for the rest."""
    return sum(c.max_prompt_tokens is None for c in classes) == 1


DEFAULT_PROMPT_CLASSES = (
    PromptClass(name="short", max_prompt_tokens=2048, concurrency=150, max_new_tokens=10_240),
    PromptClass(name="long", max_prompt_tokens=None, concurrency=32, max_new_tokens=16_384),
)
