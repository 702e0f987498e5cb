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
from jobrunner.shared import tokenizers_only
from jobrunner.shared.datasets import Conversation, DatasetRow, Pretokenized, RowError, SkippedRow, Trace

ContextPolicy = Literal["skip", "clamp"]


@dataclass(frozen=True)
class Prompt:
    row: int
    input_ids: list[int]
    prompt_class: str
    max_new_tokens: int
    # An existing trace's response (kind `traces`): written as it is, never asked of the server.
    response_ids: list[int] | None = None
    finish_reason: str = "stop"
    source_id: str | None = None  # the row's own id (jobrunner.shared.datasets), carried into its record


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


def load_tokenizer(path: str | os.PathLike, trust_remote_code: bool = False):
    """The folder's tokenizer; `trust_remote_code` runs the Python it ships (auto_map), as Kimi-K2.5's
    tiktoken tokenizer needs (docs/security.md#remote-code)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code)
    except ImportError as e:
        if not (tokenizers_only.torch_hidden() and (e.name == "torch" or "torch" in str(e))):
            raise
    tokenizers_only.let_torch_in()  # the tokenizer's own code imports torch
    return AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code)


def render_conversation(tokenizer, conversation: Conversation, template_kwargs: Mapping[str, Any],
                        add_generation_prompt: bool = True) -> list[int]:
    encoded = tokenizer.apply_chat_template(
        conversation.messages,
        tools=conversation.tools,
        add_generation_prompt=add_generation_prompt,
        tokenize=True,
        **template_kwargs,
    )
    return input_ids_of(encoded)


def render_trace(tokenizer, trace: Trace, template_kwargs: Mapping[str, Any]) -> tuple[list[int], list[int]]:
    """A message trace's (prompt ids, response ids): the prompt exactly as generation would send it,
    and the response the whole conversation renders after the point where it and that prompt part,
    up to its end token included.

    The prompt may hold what the template adds only to a generation prompt (an empty thinking block
    when thinking is off, as Qwen3-style templates do), which the response then follows. The turns
    before the response must render the same in both: a template that rewrites history once a
    response follows (dropping earlier reasoning, say) cannot give the sample generation would have.
    """
    before = Conversation(trace.row, trace.messages[:-1], trace.tools)
    history = render_conversation(tokenizer, before, template_kwargs, add_generation_prompt=False)
    prompt = render_conversation(tokenizer, before, template_kwargs)
    full = render_conversation(tokenizer, Conversation(trace.row, trace.messages, trace.tools), template_kwargs,
                               add_generation_prompt=False)
    if full[:len(history)] != history:
        raise RowError("template_not_prefix", "the template renders the earlier turns differently once the response "
                                              "follows")
    shared = next((i for i, (a, b) in enumerate(zip(prompt, full)) if a != b), min(len(prompt), len(full)))
    response = full[shared:]
    # The template may put formatting after the turn's end token (a newline) that the model never
    # generates: the response ends where generation stops, at its last end token.
    eos = tokenizer.eos_token_id
    if eos is not None and eos in response:
        response = response[:len(response) - response[::-1].index(eos)]
    if not response:
        raise RowError("no_response", "the response rendered no tokens")
    return prompt, response


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
        response = None
        if isinstance(row, Trace):
            try:
                ids, response = self._trace_ids(row)
            except RowError as e:
                return SkippedRow(row.row, e.reason, e.detail)
        elif isinstance(row, Pretokenized):
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
        if response is not None:  # a trace keeps its own response; it is never sent, so no context applies
            return Prompt(row.row, ids, cls.name, len(response), response, row.finish_reason, row.source_id)
        wanted = self.max_new_tokens_override or cls.max_new_tokens
        max_new = max_new_tokens_for(len(ids), wanted, self.context_length, self.policy, self.min_room)
        if max_new is None:
            return SkippedRow(
                row.row, "prompt_too_long",
                f"{len(ids)} prompt tokens leave {self.context_length - len(ids) - 1} of {self.context_length} "
                f"(policy {self.policy}, wanted {wanted}, min room {self.min_room})",
            )
        return Prompt(row.row, ids, cls.name, max_new, source_id=row.source_id)

    def _trace_ids(self, trace: Trace) -> tuple[list[int], list[int]]:
        if trace.messages is None:
            prompt, response = trace.prompt_ids, trace.response_ids
        elif self.tokenizer is None:
            raise RowError("no_tokenizer", "a message trace needs tokenizer_path")
        else:
            try:
                prompt, response = render_trace(self.tokenizer, trace, self.template_kwargs)
            except RowError:
                raise
            except Exception as e:
                raise RowError("template_error", f"{type(e).__name__}: {e}"[:300]) from None
        vocabulary = len(self.tokenizer) if self.tokenizer is not None else None
        outside = [t for t in (*prompt, *response) if vocabulary is not None and t >= vocabulary]
        if outside:
            raise RowError("token_outside_vocabulary", f"id {outside[0]} (the tokenizer has {vocabulary})")
        return prompt, response
