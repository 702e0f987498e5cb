"""A tiny but real model, built in about a second with nothing downloaded: the demo's and the tests'
stand-in for a target checkpoint.

`build_tiny_tokenizer(directory)` trains a byte-level BPE (so any text encodes, nothing is UNK) on
a few sentences with the `tokenizers` library, adds the chat special tokens, attaches a Jinja chat
template that renders a system prompt, tools, assistant tool calls, tool results and the
`enable_thinking` switch (false inserts an empty think block, as Qwen3 does), and saves it with
`save_pretrained` so `AutoTokenizer.from_pretrained(directory)` loads it like a hub checkpoint.
Assistant content is wrapped in `{% generation %}` so `return_assistant_tokens_mask` works.

`build_tiny_llama(directory, vocab_size)` saves a seeded random `LlamaForCausalLM` beside it.
"""

from __future__ import annotations

import os
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
    "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
]
EOS_TOKEN = "<|im_end|>"
VOCAB_SIZE = 512

# transformers renders chat templates with trim_blocks: a newline right after a block tag is
# dropped, so every newline that follows one is written as the expression {{ NL }}.
CHAT_TEMPLATE = (
    "{% set NL = '\\n' %}"
    "{% if tools %}"
    "<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}{{ NL }}{{ NL }}{% endif %}"
    "# Tools\n<tools>"
    "{% for tool in tools %}{{ NL }}{{ tool | tojson }}{% endfor %}"
    "{{ NL }}</tools><|im_end|>\n"
    "{% elif messages[0].role == 'system' %}"
    "<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'system' and loop.first %}"
    "{% elif message.role in ('user', 'system') %}"
    "<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{% elif message.role == 'assistant' %}"
    "<|im_start|>assistant\n"
    "{% generation %}"
    "{{ message.content or '' }}"
    "{% for call in message.tool_calls or [] %}"
    "{% set fn = call.function if call.function is defined else call %}"
    "<tool_call>\n{\"name\": \"{{ fn.name }}\", \"arguments\": "
    "{% if fn.arguments is string %}{{ fn.arguments }}{% else %}{{ fn.arguments | tojson }}{% endif %}"
    "}{{ NL }}</tool_call>"
    "{% endfor %}"
    "<|im_end|>"
    "{% endgeneration %}"
    "{{ NL }}"
    "{% elif message.role == 'tool' %}"
    "<|im_start|>user\n<tool_response>\n{{ message.content }}\n</tool_response><|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>{{ NL }}{{ NL }}</think>{{ NL }}{{ NL }}{% endif %}"
    "{% endif %}"
)

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "What is the weather in Paris today? It is sunny and warm.",
    "Write a Python function that returns the sum of a list of numbers.",
    "def add(a, b): return a + b",
    "Solve 12 * 7 = 84. Then add 16 to get 100.",
    "You are a helpful assistant. Answer briefly and think step by step.",
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
    "system user assistant tool function parameters type object string",
]


def build_tiny_tokenizer(directory: str | os.PathLike) -> str:
    """Build, save and return the path of a tiny tokenizer loadable with AutoTokenizer."""
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS_TOKEN, pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
    )
    fast.chat_template = CHAT_TEMPLATE
    os.makedirs(directory, exist_ok=True)
    fast.save_pretrained(str(directory))
    return str(directory)


def build_tiny_llama(directory: str | os.PathLike, vocab_size: int, num_layers: int = 8, hidden: int = 64,
                     seed: int = 0) -> str:
    """Save a seeded random `LlamaForCausalLM` (fp32) with `save_pretrained`; returns the directory."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a one-shard save needs no progress bar
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=num_layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=False,
        pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    # Random init leaves the RMSNorm weights at 1; random weights make a wrong pre/post-norm choice visible.
    with torch.no_grad():
        for module in model.modules():
            if module.__class__.__name__.endswith("RMSNorm"):
                module.weight.uniform_(0.5, 1.5)
    model.save_pretrained(directory)
    # transformers 5 saves the weights 0600 (through a temporary file); a checkpoint as downloaded from
    # the Hub is readable by all, as the pods' user (65532, not the owner) needs it.
    for weights in Path(directory).glob("*.safetensors"):
        weights.chmod(0o644)
    return str(directory)
