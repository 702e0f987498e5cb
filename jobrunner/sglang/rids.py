"""Request ids that never match one another by prefix (docs/sglang.md#abort-by-rid-prefix).

SGLang's /abort_request aborts every running rid that *starts with* the one given, so every rid
made here has the same length: none can be a prefix of another.
"""

from __future__ import annotations

import hashlib

RID_PREFIX = "dg-"
RID_HEX_CHARS = 29  # 3 + 29 = 32 characters, like a uuid4 hex


def make_rid(run_id: str, sample_id: str, attempt: int) -> str:
    """A rid that is the same length as every other rid made here, so that none is a prefix of
    another (SGLang's /abort_request aborts every rid that *starts with* the one given)."""
    digest = hashlib.sha256(f"{run_id}\x00{sample_id}\x00{attempt}".encode()).hexdigest()
    return RID_PREFIX + digest[:RID_HEX_CHARS]


def retry_rid(rid: str, retry: int) -> str:
    """The rid of the `retry`-th resend of `rid`: fresh, because the server may still hold the old
    one (a duplicate running rid is a 400), and as long as make_rid's."""
    digest = hashlib.sha256(f"{rid}\x00retry\x00{retry}".encode()).hexdigest()
    return RID_PREFIX + digest[:RID_HEX_CHARS]
