"""From dataset rows to the exact token ids sent to SGLang: chat template, prompt class, room left.

Tokenization uses the model's own tokenizer and chat template (`AutoTokenizer.from_pretrained`,
`apply_chat_template(messages, tools=..., add_generation_prompt=True, tokenize=True, **kwargs)`),
so thinking and tool-call tokens are exactly the model's. transformers 5.x returns a
`BatchEncoding` there and 4.x a plain list (docs/sglang.md#tokenizers-transformers, seen with 5.24); `input_ids_of` takes both.

The decisions (which class a prompt is in, how many new tokens it may ask for) are pure functions;
`PromptPreparer` applies them to a row and runs on a worker thread, never on the event loop.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from draftgen_contracts.prompt_classes import PromptClass
from jobrunner.datasets import Conversation, DatasetRow, Pretokenized, SkippedRow

ContextPolicy = Literal["skip", "clamp"]


@dataclass(frozen=True)
class Prompt:
    row: int
    input_ids: list[int]
    prompt_class: str
    max_new_tokens: int


def classify_prompt(prompt_tokens: int, classes: Sequence[PromptClass]) -> PromptClass:
    """The first class (in order of max_prompt_tokens, unbounded last) that the prompt fits in."""
    for c in sorted(classes, key=lambda c: (c.max_prompt_tokens is None, c.max_prompt_tokens or 0)):
        if c.max_prompt_tokens is None or prompt_tokens <= c.max_prompt_tokens:
            return c
    raise ValueError(f"no prompt class takes {prompt_tokens} prompt tokens; give one class no max_prompt_tokens")


def max_new_tokens_for(
    prompt_tokens: int, wanted: int, context_length: int, policy: ContextPolicy, min_room: int
) -> int | None:
    """max_new_tokens to send, or None to skip the prompt.

    The room is context - prompt - 1: every SGLang release accepts that (0.5.23 refuses only
    prompt + max_new_tokens > context, earlier ones `>=`; docs/sglang.md#context-length). `skip` drops a prompt that does not fit with the full `wanted`; `clamp`
    asks for the room left instead, and drops the prompt only when less than `min_room` is left.
    """
    room = context_length - prompt_tokens - 1
    if room >= wanted:
        return wanted
    if policy == "clamp" and room >= max(1, min_room):
        return room
    return None


def input_ids_of(encoded: Any) -> list[int]:
    """The token ids from apply_chat_template(tokenize=True): a list (transformers 4.x) or a
    BatchEncoding / dict with `input_ids` (5.x), possibly batched with one row."""
    ids = encoded["input_ids"] if isinstance(encoded, Mapping) or hasattr(encoded, "keys") else encoded
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    if ids and isinstance(ids[0], list):
        if len(ids) != 1:
            raise ValueError(f"expected one encoded conversation, got {len(ids)}")
        ids = ids[0]
    return [int(t) for t in ids]


def load_tokenizer(path: str | os.PathLike):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


def render_conversation(tokenizer, conversation: Conversation, template_kwargs: Mapping[str, Any]) -> list[int]:
    encoded = tokenizer.apply_chat_template(
        conversation.messages,
        tools=conversation.tools,
        add_generation_prompt=True,
        tokenize=True,
        **template_kwargs,
    )
    return input_ids_of(encoded)


@dataclass
class PromptPreparer:
    """Turns a dataset row into a Prompt (or a SkippedRow with its reason) for one dataset."""

    tokenizer: Any
    template_kwargs: Mapping[str, Any]
    classes: Sequence[PromptClass]
    context_length: int
    policy: ContextPolicy = "clamp"
    min_room: int = 256
    class_override: str | None = None
    max_new_tokens_override: int | None = None

    def prepare(self, row: DatasetRow) -> Prompt | SkippedRow:
        if isinstance(row, SkippedRow):
            return row
        if isinstance(row, Pretokenized):
            ids = row.input_ids
        else:
            if self.tokenizer is None:
                return SkippedRow(row.row, "no_tokenizer", "a chat row needs tokenizer_path")
            try:
                ids = render_conversation(self.tokenizer, row, self.template_kwargs)
            except Exception as e:  # a template raising on one odd row must not stop the run
                return SkippedRow(row.row, "template_error", f"{type(e).__name__}: {e}"[:300])
        if not ids:
            return SkippedRow(row.row, "empty", "the template rendered no tokens")
        if self.class_override is not None:
            cls = next(c for c in self.classes if c.name == self.class_override)
        else:
            cls = classify_prompt(len(ids), self.classes)
        wanted = self.max_new_tokens_override or cls.max_new_tokens
        max_new = max_new_tokens_for(len(ids), wanted, self.context_length, self.policy, self.min_room)
        if max_new is None:
            return SkippedRow(
                row.row, "prompt_too_long",
                f"{len(ids)} prompt tokens leave {self.context_length - len(ids) - 1} of {self.context_length} "
                f"(policy {self.policy}, wanted {wanted}, min room {self.min_room})",
            )
        return Prompt(row.row, ids, cls.name, max_new)
