"""Bytes per stored token of draftgen's EAGLE-3 hidden states (docs/eagle3.md#bytes-per-token).

Each token stores its auxiliary states and the final state in the storage dtype, its int64 token
id (as SpecForge and speculators store ids) and a uint8 loss-mask entry: bf16 with 3 aux layers is
8H + 9 bytes. fp8 (e4m3) stores one float32 scale per state beside its values: 4H + 16 + 9 bytes.
"""

from __future__ import annotations

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}
SCALED_DTYPES = {"fp8"}  # stored with one float32 scale per token and state
SCALE_BYTES = 4
# The final states extraction can store, and what each is.
FINAL_STATES = {"post-norm": "the final norm's output, the lm_head's input (SpecForge's target)",
                "pre-norm": "the last decoder layer's output, before the final norm (speculators' target)"}
# The final state each trainer's state export trains on (docs/formats.md#state-exports).
EXPORT_FINAL_STATE = {"specforge": "post-norm", "speculators": "pre-norm"}
ID_BYTES = 8
MASK_BYTES = 1


def bytes_per_token(hidden_size: int, aux_count: int, dtype: str) -> int:
    states = aux_count + 1
    scales = states * SCALE_BYTES if dtype in SCALED_DTYPES else 0
    return states * hidden_size * DTYPE_BYTES[dtype] + scales + ID_BYTES + MASK_BYTES


# What each state export writes (jobrunner/hidden_states/exports.py): SpecForge's files hold the states in bf16
# (fp8 dequantized) with int64 ids and an int64 loss mask; speculators' keep the storage dtype (fp8
# with its scales) with int64 token ids, and its Arrow rows int64 ids and mask again. Per sample
# besides: a file's own header and zip or safetensors framing (measured on the tiny model in
# tests/corpus/test_corpus_exports.py, where the export's bytes are held to this within 10 %).
EXPORT_FILE_BYTES = {"specforge": 2400, "speculators": 300}


def export_bytes_per_token(kind: str, hidden_size: int, aux_count: int, dtype: str) -> int:
    states = aux_count + 1
    if kind == "specforge":
        kept = "bf16" if dtype in SCALED_DTYPES else dtype
        return states * hidden_size * DTYPE_BYTES[kept] + 2 * ID_BYTES
    scales = states * SCALE_BYTES if dtype in SCALED_DTYPES else 0
    return states * hidden_size * DTYPE_BYTES[dtype] + scales + 3 * ID_BYTES


def export_bytes(kind: str, tokens: float, samples: float, hidden_size: int, aux_count: int, dtype: str) -> int:
    """The bytes a state export of `tokens` stored tokens in `samples` samples writes."""
    return int(tokens * export_bytes_per_token(kind, hidden_size, aux_count, dtype) + samples * EXPORT_FILE_BYTES[kind])


def human_bytes(n: float) -> str:
    """Bytes for people, in powers of 1000 as disks are sold: 34.1 MB, 7.9 TB."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000:
            return f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"
