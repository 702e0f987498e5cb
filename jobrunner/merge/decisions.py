"""The merge's pure decisions about one record: whether it may enter the corpus, its content key,
its bucket, its split, what the truncated-response policy does with it."""

from __future__ import annotations

import hashlib
import math
from array import array

from draftgen_contracts.generation_record import FINISH_REASONS

# Bucket files are written all at once; past this many open files, ask for more memory instead.
MAX_BUCKETS = 1024
# A bucket in memory (the lines, Python's per-line overhead, the sort) takes ~1.3x its file size;
# a quarter of the limit per bucket leaves room for the interpreter, buffers and the stats.
BUCKET_SHARE_OF_MEMORY = 4
# Corpus lines are larger than the generation lines they come from (the mask adds ~2 bytes per token).
CORPUS_BYTES_PER_INPUT_BYTE = 1.5


def truncation_outcome(finish_reason: str, policy: str) -> tuple[bool, bool]:
    """(keep the sample?, its `truncated` flag) for a response under the truncated-response policy.

    `keep` keeps cut-off responses as if complete (flag false; `finish_reason` still says "length"),
    `drop` removes them, `mark` keeps them flagged so a trainer can filter or weight them."""
    if finish_reason != "length":
        return True, False
    return policy != "drop", policy == "mark"


def record_problem(rec: dict) -> str | None:
    """Why a generation record cannot enter the corpus (the reason it is counted under), or None."""
    try:
        prompt, response = rec["input_ids"], rec["output_ids"]
        sid, dataset, row = rec["sample_id"], rec["dataset"], rec["row"]
        finish, completion, prompt_tokens = rec["finish_reason"], rec["completion_tokens"], rec["prompt_tokens"]
    except (KeyError, TypeError):
        return "missing_field"
    if not isinstance(row, int) or isinstance(row, bool):
        return "bad_sample_id"
    if not isinstance(sid, str) or not isinstance(dataset, str) or any(c in sid + dataset for c in "\t\n"):
        return "bad_sample_id"
    if not isinstance(prompt, list) or not isinstance(response, list):
        return "malformed_ids"
    if not prompt:
        return "empty_prompt"
    if not response:
        return "empty_response"
    if finish not in FINISH_REASONS:
        return "bad_finish_reason"
    if completion != len(response):
        return "completion_tokens_mismatch"
    if prompt_tokens != len(prompt):
        return "prompt_tokens_mismatch"
    return None


def token_arrays(prompt_ids: list, output_ids: list) -> tuple[array, array] | None:
    """The ids as int64 arrays, or None when one is not an integer (array() checks in C, ~10x faster
    than a Python loop over the ids; it takes JSON true/false as 1/0, which the caller refuses)."""
    try:
        return array("q", prompt_ids), array("q", output_ids)
    except (TypeError, OverflowError):
        return None


def content_key(prompt: array, output: array, seed: int) -> bytes:
    """Seeded 128-bit hash of the token content; the prompt length is hashed too (a token moved
    across the prompt/response boundary makes another sample)."""
    h = hashlib.blake2b(digest_size=16, key=seed.to_bytes(8, "little", signed=True))
    h.update(len(prompt).to_bytes(8, "little"))
    h.update(prompt.tobytes())
    h.update(output.tobytes())
    return h.digest()


def bucket_of(key: bytes, buckets: int) -> int:
    """The bucket owning `key`: buckets are equal ranges of the key space, in key order."""
    return (int.from_bytes(key[:8], "big") * buckets) >> 64


def buckets_needed(input_bytes: int, memory_limit_mb: int) -> int:
    per_bucket = memory_limit_mb * (1 << 20) // BUCKET_SHARE_OF_MEMORY
    needed = max(1, math.ceil(input_bytes * CORPUS_BYTES_PER_INPUT_BYTE / per_bucket))
    if needed > MAX_BUCKETS:
        raise ValueError(f"{input_bytes} input bytes need {needed} buckets at {memory_limit_mb} MB; "
                         f"at most {MAX_BUCKETS} are allowed: raise --memory-limit-mb")
    return needed


def is_eval(sample_id: str, seed: int, eval_fraction: float) -> bool:
    """Whether a sample belongs to the eval split: a seeded hash of its id, below the fraction."""
    h = hashlib.blake2b(sample_id.encode(), digest_size=8, key=b"split" + seed.to_bytes(8, "little", signed=True))
    return int.from_bytes(h.digest(), "big") < eval_fraction * 2**64
