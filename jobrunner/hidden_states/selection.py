"""Pure decisions of extraction: which layers, which samples, how they are batched, how many bytes.

Layer numbering. EAGLE-3 captures the outputs of decoder layers {1, N//2-1, N-4} (0-based), which
are transformers `output_hidden_states` indices {2, N//2, N-3}: index 0 is the embedding output and
index i the output of layer i-1 (checked by tests/corpus/test_extract_states.py against a real
forward pass). SpecForge's `eagle_aux_hidden_state_layer_ids` uses the layer numbering; the CLI
takes layer numbers too and this module converts.
"""

from __future__ import annotations

from collections.abc import Iterable

from draftgen_contracts.drafters import eagle3_layers as default_aux_layers
from draftgen_contracts.hidden_state_layout import bytes_per_token

TOO_LONG_POLICIES = ("truncate", "skip")


def check_aux_layers(layers: list[int], num_layers: int) -> None:
    """Refuse layer numbers the model does not have, or repeated ones, with the valid range."""
    if not layers:
        raise ValueError("at least one auxiliary layer is needed")
    bad = [layer for layer in layers if not 0 <= layer < num_layers]
    if bad:
        raise ValueError(f"aux layers {bad} do not exist: the model has {num_layers} decoder layers "
                         f"(valid: 0..{num_layers - 1}; EAGLE-3 default {default_aux_layers(num_layers)})")
    if len(set(layers)) != len(layers):
        raise ValueError(f"aux layers {layers} repeat a layer")


def hidden_state_indices(layers: list[int]) -> list[int]:
    """transformers `output_hidden_states` index of each layer's output."""
    return [layer + 1 for layer in layers]


def length_action(length: int, prompt_len: int, max_len: int | None, policy: str) -> tuple[str, int]:
    """('keep', stored length) or ('skip', reason) for a sample under the max-length policy.

    A truncated sample keeps its first `max_len` tokens; one whose cut leaves no response token
    (nothing to train on) is skipped whatever the policy."""
    if max_len is None or length <= max_len:
        return "keep", length
    if policy == "skip":
        return "skip", "too_long"
    if prompt_len >= max_len:
        return "skip", "no_response_token_within_max_len"
    return "keep", max_len


def plan_batches(lengths: list[int], max_batch_tokens: int, max_batch_size: int) -> list[list[int]]:
    """Group sample positions into batches whose padded size (longest x count) fits `max_batch_tokens`.

    Longest first, so the biggest batch runs first and a memory problem shows at once; equal lengths
    keep their input order, so the plan is a pure function of the input."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = lengths[current[0]] if current else lengths[i]
        if current and (len(current) >= max_batch_size or longest * (len(current) + 1) > max_batch_tokens):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def size_estimate(tokens: int, hidden_size: int, aux_count: int, dtype: str) -> dict:
    per_token = bytes_per_token(hidden_size, aux_count, dtype)
    return {"tokens": tokens, "bytes_per_token": per_token, "bytes": tokens * per_token,
            "hidden_size": hidden_size, "aux_count": aux_count, "dtype": dtype}


def windows(items: Iterable, size: int):
    """Consecutive lists of at most `size` items (the unit the batch planner sorts within)."""
    window = []
    for item in items:
        window.append(item)
        if len(window) == size:
            yield window
            window = []
    if window:
        yield window
