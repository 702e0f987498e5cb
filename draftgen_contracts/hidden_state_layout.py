"""Bytes per stored token of draftgen's EAGLE-3 hidden states (docs/eagle3.md#bytes-per-token).

Each token stores its auxiliary states and the final state in the storage dtype, its int64 token
id (as SpecForge and speculators store ids) and a uint8 loss-mask entry: bf16 with 3 aux layers is
8H + 9 bytes.
"""

from __future__ import annotations

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
ID_BYTES = 8
MASK_BYTES = 1


def bytes_per_token(hidden_size: int, aux_count: int, dtype: str) -> int:
    return (aux_count + 1) * hidden_size * DTYPE_BYTES[dtype] + ID_BYTES + MASK_BYTES


def human_bytes(n: float) -> str:
    """Bytes for people, in powers of 1000 as disks are sold: 34.1 MB, 7.9 TB."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000:
            return f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"
