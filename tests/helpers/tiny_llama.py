"""A tiny, randomly initialised Llama causal LM, built on the fly and saved like any checkpoint."""

from __future__ import annotations

import os


def build_tiny_llama(directory: str | os.PathLike, vocab_size: int, num_layers: int = 8, hidden: int = 64,
                     seed: int = 0) -> str:
    """Save a seeded random `LlamaForCausalLM` (fp32) with `save_pretrained`; returns the directory."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

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
    return str(directory)
