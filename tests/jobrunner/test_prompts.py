"""Tokenization with a real tokenizer and chat template; prompt classes and context room (pure)."""

import pytest

from draftgen_contracts.prompt_classes import DEFAULT_PROMPT_CLASSES, PromptClass
from jobrunner.shared.datasets import Conversation, Pretokenized, SkippedRow, parse_row
from jobrunner.shared.prompts import (
    Prompt,
    PromptPreparer,
    classify_prompt,
    input_ids_of,
    load_tokenizer,
    max_new_tokens_for,
    render_conversation,
)

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def test_classify_prompt_by_length():
    assert classify_prompt(10, DEFAULT_PROMPT_CLASSES).name == "short"
    assert classify_prompt(2048, DEFAULT_PROMPT_CLASSES).name == "short"
    assert classify_prompt(2049, DEFAULT_PROMPT_CLASSES).name == "long"
    with pytest.raises(ValueError):
        classify_prompt(5000, [PromptClass(name="s", max_prompt_tokens=100, concurrency=1, max_new_tokens=1)])


def test_max_new_tokens_skip_and_clamp():
    # SGLang needs prompt + max_new_tokens < context: the room is context - prompt - 1
    assert max_new_tokens_for(499, 500, 1000, "skip", 64) == 500
    assert max_new_tokens_for(500, 500, 1000, "skip", 64) is None
    assert max_new_tokens_for(600, 500, 1000, "clamp", 64) == 399
    assert max_new_tokens_for(950, 500, 1000, "clamp", 64) is None
    assert max_new_tokens_for(999, 500, 1000, "clamp", 1) is None


def test_input_ids_of_both_transformers_shapes():
    assert input_ids_of([1, 2, 3]) == [1, 2, 3]
    assert input_ids_of({"input_ids": [1, 2], "attention_mask": [1, 1]}) == [1, 2]
    assert input_ids_of({"input_ids": [[4, 5]]}) == [4, 5]


def test_chat_template_renders_tools_tool_calls_and_thinking_switch(tokenizer_path):
    tok = load_tokenizer(tokenizer_path)
    conv = parse_row(0, {"tools": TOOLS, "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."}]})
    assert isinstance(conv, Conversation)
    on = render_conversation(tok, conv, {"enable_thinking": True})
    off = render_conversation(tok, conv, {"enable_thinking": False})
    text = tok.decode(on)
    assert '"name": "get_weather"' in text and "<tool_call>" in text and "<tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n") and "Sunny." not in text  # the final turn is regenerated
    think, end_think = tok.convert_tokens_to_ids(["<think>", "</think>"])
    assert off[: len(on)] == on and think in off[len(on):] and end_think in off[len(on):]
    assert think not in on
    # the ids are the tokenizer's own: special tokens are single ids
    assert tok.convert_tokens_to_ids("<tool_call>") in on


def test_preparer_classes_overrides_and_skips(tokenizer_path):
    tok = load_tokenizer(tokenizer_path)
    classes = [PromptClass(name="short", max_prompt_tokens=20, concurrency=4, max_new_tokens=100), PromptClass(name="long", max_prompt_tokens=None, concurrency=2, max_new_tokens=300)]
    prep = PromptPreparer(tok, {}, classes, context_length=200, policy="clamp", min_room=10)
    p = prep.prepare(Pretokenized(1, list(range(5, 15))))
    assert p == Prompt(1, list(range(5, 15)), "short", 100)
    p = prep.prepare(Pretokenized(2, [7] * 50))
    assert p.prompt_class == "long" and p.max_new_tokens == 149  # clamped to the room left
    assert prep.prepare(Pretokenized(3, [7] * 195)).reason == "prompt_too_long"
    assert prep.prepare(SkippedRow(4, "bad_json")) == SkippedRow(4, "bad_json")
    over = PromptPreparer(tok, {}, classes, 200, class_override="long", max_new_tokens_override=7)
    assert over.prepare(Pretokenized(5, [9, 9])) == Prompt(5, [9, 9], "long", 7)
    conv = prep.prepare(parse_row(6, {"prompt": "hello"}))
    assert isinstance(conv, Prompt) and conv.input_ids == input_ids_of(
        tok.apply_chat_template([{"role": "user", "content": "hello"}], add_generation_prompt=True, tokenize=True))
    no_tok = PromptPreparer(None, {}, classes, 200)
    assert no_tok.prepare(parse_row(7, {"prompt": "x"})).reason == "no_tokenizer"
