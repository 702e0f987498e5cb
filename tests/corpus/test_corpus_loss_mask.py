"""The corpus loss mask covers exactly the assistant tokens the chat template marks, thinking and
tool calls included, with a real tokenizer (devtools/draftgen_dev/tiny_model.py)."""

from __future__ import annotations

import pytest

from draftgen_dev.tiny_model import build_tiny_tokenizer
from jobrunner.shared import corpus
from jobrunner.merge.run import merge_corpus
from jobrunner.merge.settings import MergeSettings
from tests.corpus.conftest import generation_record, write_generation

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "weather of a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(build_tiny_tokenizer(tmp_path_factory.mktemp("tok")))


def ids_of(encoding):
    return list(encoding["input_ids"] if not isinstance(encoding, list) else encoding)


@pytest.mark.parametrize("assistant", [
    {"role": "assistant", "content": "<think>\nadd the numbers\n</think>\n\n12 * 7 = 84."},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": "get_weather", "arguments": {"city": "Paris"}}}]},
])
def test_loss_mask_is_the_assistant_mask(tokenizer, tmp_path, assistant):
    prompt_msgs = [{"role": "system", "content": "You are a helpful assistant."},
                   {"role": "user", "content": "What is the weather in Paris today?"}]
    prompt = ids_of(tokenizer.apply_chat_template(prompt_msgs, tools=TOOLS, add_generation_prompt=True, tokenize=True))
    full = tokenizer.apply_chat_template(prompt_msgs + [assistant], tools=TOOLS, tokenize=True, return_dict=True,
                                         return_assistant_tokens_mask=True)
    full_ids, assistant_mask = list(full["input_ids"]), list(full["assistant_masks"])
    assert full_ids[: len(prompt)] == prompt
    # What SGLang returns: the generated tokens up to and including the stop token <|im_end|>.
    end = full_ids.index(tokenizer.convert_tokens_to_ids("<|im_end|>"), len(prompt)) + 1
    response = full_ids[len(prompt): end]

    root = tmp_path / "out"
    write_generation(root, {("chat", 0): [generation_record("chat", 0, prompt, response)]})
    merge_corpus(root, root / "corpus", MergeSettings(eval_fraction=0.0), log=lambda *_: None)
    (rec,) = corpus.iter_corpus(root / "corpus")
    assert rec["input_ids"] == full_ids[:end]
    assert rec["loss_mask"] == assistant_mask[:end]
    masked = tokenizer.decode([t for t, m in zip(rec["input_ids"], rec["loss_mask"]) if m])
    if "tool_calls" in assistant:
        assert "<tool_call>" in masked and "get_weather" in masked
    else:
        assert masked.startswith("<think>") and "</think>" in masked
    assert masked.endswith("<|im_end|>")
