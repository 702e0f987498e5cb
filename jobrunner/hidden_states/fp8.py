"""FP8 storage of hidden states: float8 e4m3 values with one float32 scale per token and state.

For a state vector x of one token (one aux layer's output, or the final state), of H values:

    scale = max(amax(|x|) / 448, 1e-12)      448: the largest finite e4m3 value
    q     = (x / scale).to(float8_e4m3fn)    H bytes
    x'    = q.to(float32) * scale

so a token of K aux states and the final state costs (K+1)·H + 4·(K+1) bytes instead of 2·(K+1)·H
in bf16. This is the quantization of speculators' FP8 connector (hs_connectors/fp8_utils.py of
hs-connectors 0.9.0: scale = amax / FP8_MAX clamped at 1e-12, values divided and cast) with the
amax taken per state rather than over the token's states together: the layers' magnitudes differ
by orders (the final state is normed, the middle layers' residual streams are not), and one scale
for all of them would spend the small ones' precision on the large one's range. A scale of shape
[T, K+1, 1] broadcasts in speculators' dequantize exactly as its own [T, 1, 1] does.
"""

from __future__ import annotations

SCALE_FLOOR = 1e-12


def quantize(states):
    """(fp8 values, float32 scales) of `states` [..., H]: one scale per vector along the last axis,
    the scales shaped [..., 1]."""
    import torch

    fp8 = torch.float8_e4m3fn
    values = states.float()
    scale = (values.abs().amax(dim=-1, keepdim=True) / torch.finfo(fp8).max).clamp(min=SCALE_FLOOR)
    return (values / scale).to(fp8), scale


def dequantize(values, scale, dtype=None):
    """The states back from their fp8 values and scales, in `dtype` (default bfloat16)."""
    import torch

    return (values.float() * scale.float()).to(dtype or torch.bfloat16)
