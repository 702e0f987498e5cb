"""A test model built like Kimi-K2.5, in about a second with nothing downloaded: what draftgen meets
when a model ships its tokenizer and config as Python (docs/security.md#remote-code).

`build_kimi_like(directory)` writes a folder that loads only with `trust_remote_code=True`:
- a tiktoken BPE (`tiktoken.model`, base64 ranks trained here on a small corpus with tiktoken's own
  trainer) read by a slow `PreTrainedTokenizer` subclass named in `tokenizer_config.json`'s `auto_map`
  (`tokenization_kimi.TikTokenTokenizer`), special tokens numbered after the ranks, the rest reserved;
- a Kimi-style chat template (`<|im_user|>`, `<|im_middle|>`, thinking in `<think>`, a tool
  declaration turn, tool-call sections) whose generation prompt opens an empty think block when
  `thinking` is false, and a tokenizer whose `apply_chat_template` sorts the tools' keys;
- a `config.json` of `model_type: kimi_like` with the language model under `text_config`, loaded
  through `auto_map` (`configuration_kimi.KimiLikeConfig`, `modeling_kimi.KimiLikeForCausalLM`);
  the language model is a seeded random Llama (configuration_kimi.py says why not Kimi's own);
- `generation_config.json` with the sampling the model's authors recommend and the turn's end token.

The tokenizer's `eos_token` is `[EOS]` while turns end with `<|im_end|>`, as in Kimi's files: the
ids generation stops at come from generation_config.json's `eos_token_id`.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path

CODE_FILES = ("tokenization_kimi.py", "configuration_kimi.py", "modeling_kimi.py")
HERE = Path(__file__).parent
BASE_VOCAB = 448  # 256 bytes and 192 merges
RESERVED = 64  # tokenization_kimi.NUM_RESERVED_SPECIAL_TOKENS
VOCAB_SIZE = BASE_VOCAB + RESERVED
SPECIAL_TOKENS = [
    "[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>",
    "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<think>", "</think>", "[PAD]",
]
TURN_END = "<|im_end|>"
# The sampling its authors recommend, as generation_config.json says it: Kimi-K2.5's own temperature
# and top_p (0.6 and 0.95 instant), and top_k 1 so that whether a server applied the file shows in
# one request (greedy answers are the same every time).
RECOMMENDED_SAMPLING = {"temperature": 0.6, "top_p": 0.95, "top_k": 1}

CORPUS = (
    "The quick brown fox jumps over the lazy dog. What is the weather in Paris today? It is sunny and warm. "
    "Write a Python function that returns the sum of a list of numbers: def add(a, b): return a + b. "
    "Solve 12 * 7 = 84, then add 16 to get 100. You are a helpful assistant; think step by step. "
    '{"name": "get_weather", "arguments": {"city": "Paris"}} {"type": "function", "function": {"name": '
    '"search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}} '
    "system user assistant tool functions description parameters required object string. "
    "你好，今天天气怎么样？请一步一步地思考。北京是中国的首都。 "
) * 8


def special_token_ids() -> dict[str, int]:
    return {token: BASE_VOCAB + i for i, token in enumerate(SPECIAL_TOKENS)}


def write_ranks(path: Path) -> None:
    """tiktoken.model: every byte, then merges trained on CORPUS with tiktoken's own trainer, as
    base64 ranks (tiktoken.load's format)."""
    from tiktoken._educational import bpe_train

    from .tokenization_kimi import PATTERN

    ranks = bpe_train(CORPUS, BASE_VOCAB, PATTERN, visualise=None)
    with open(path, "wb") as f:
        for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
            f.write(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")


def tokenizer_config() -> dict:
    added = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                      "special": True} for t, i in special_token_ids().items()}
    return {
        "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
        "tokenizer_class": "TikTokenTokenizer",
        "bos_token": "[BOS]", "eos_token": "[EOS]", "pad_token": "[PAD]", "unk_token": None,
        "additional_special_tokens": [t for t in SPECIAL_TOKENS if t not in ("[BOS]", "[EOS]", "[PAD]")],
        "added_tokens_decoder": added,
        "model_max_length": 2048,
        "chat_template": (HERE / "chat_template.jinja").read_text(),
    }


def model_config(num_layers: int, hidden: int) -> dict:
    ids = special_token_ids()
    text = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": VOCAB_SIZE,
            "hidden_size": hidden, "intermediate_size": hidden * 2, "num_hidden_layers": num_layers,
            "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 2048,
            "rms_norm_eps": 1e-6, "rope_theta": 50000.0, "tie_word_embeddings": False,
            "bos_token_id": ids["[BOS]"], "eos_token_id": ids["[EOS]"], "pad_token_id": ids["[PAD]"]}
    return {
        "model_type": "kimi_like",
        # What SGLang instantiates (configuration_kimi.py says why a Llama).
        "architectures": ["LlamaForCausalLM"],
        "auto_map": {"AutoConfig": "configuration_kimi.KimiLikeConfig",
                     "AutoModelForCausalLM": "modeling_kimi.KimiLikeForCausalLM"},
        "text_config": text,
        # A wrapper with a text_config is multimodal to SGLang, which then wants an image processor for
        # the architecture; this one has no vision tower (sglang/srt/configs/model_config.py reads it).
        "language_model_only": True,
        "tie_word_embeddings": False, "bos_token_id": ids["[BOS]"], "eos_token_id": ids["[EOS]"],
        "pad_token_id": ids["[PAD]"], "dtype": "float32",
    }


def generation_config() -> dict:
    ids = special_token_ids()
    return {"bos_token_id": ids["[BOS]"], "eos_token_id": [ids[TURN_END], ids["[EOS]"]], **RECOMMENDED_SAMPLING}


def build_kimi_like(directory: str | os.PathLike, num_layers: int = 8, hidden: int = 64, seed: int = 0) -> str:
    """Write the whole folder (tokenizer, custom code, config, random weights); returns its path."""
    directory = Path(build_kimi_like_without_weights(directory, num_layers, hidden))
    _save_weights(directory, seed)
    # save_pretrained rewrites the configs from its objects: keep them as shipped
    _write(directory, _configs(num_layers, hidden))
    return str(directory)


def build_kimi_like_without_weights(directory: str | os.PathLike, num_layers: int = 8, hidden: int = 64) -> str:
    """The folder as a tokenizer sees it (the code, the ranks, the configs): no torch needed."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name in CODE_FILES:
        shutil.copyfile(HERE / name, directory / name)
    write_ranks(directory / "tiktoken.model")
    _write(directory, _configs(num_layers, hidden))
    return str(directory)


def _configs(num_layers: int, hidden: int) -> dict[str, dict]:
    return {"tokenizer_config.json": tokenizer_config(), "config.json": model_config(num_layers, hidden),
            "generation_config.json": generation_config()}


def _write(directory: Path, files: dict[str, dict]) -> None:
    for name, document in files.items():
        (directory / name).write_text(json.dumps(document, indent=2) + "\n")


def _save_weights(directory: Path, seed: int) -> None:
    """Seeded random weights of the text model, under Llama's names, written by transformers itself
    from the folder's own config and model classes (as remote code)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    config = AutoConfig.from_pretrained(directory, trust_remote_code=True)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, trust_remote_code=True, dtype=torch.float32)
    with torch.no_grad():  # random norms make a wrong pre/post-norm choice visible (as the tiny Llama)
        for module in model.modules():
            if module.__class__.__name__.endswith("RMSNorm"):
                module.weight.uniform_(0.5, 1.5)
    model.save_pretrained(directory)
