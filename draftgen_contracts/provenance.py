"""What made a corpus and its hidden states: written by generation, gathered by the merge into the
corpus manifest and by extraction into the hidden-state index (docs/formats.md#provenance).

A drafter is trained for one exact target: a draft trained on one version of a model can lose to
the base draft on the next. So each generate process appends a *session* to its replica's file
`<output root>/generate/provenance-rNNN.json` when it starts: the server's reported version and args
(SGLang's `/server_info`), hashes of the model's config and tokenizer files and of the chat
template, the template kwargs, sampling params, max new tokens and class table of every dataset. A
replica resumed on another server adds a session; the merge says when sessions disagree.
"""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path

# transformers' output_hidden_states has the embeddings at index 0, so the output of decoder layer i
# (what draftgen's aux layer i is) is hidden state index i+1.
AUX_LAYER_CONVENTION = "aux layer i is the output of decoder layer i (0-based): output_hidden_states index i+1"
# The small files that define a checkpoint's behaviour beside its weights (weights are hashed by nobody:
# ~1 TB; their index file names every shard with its size).
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "chat_template.json", "tokenizer.model", "tiktoken.model", "vocab.json", "merges.txt")
# Keys of /server_info that change while a server runs, or say nothing of what it generates.
VOLATILE_SERVER_KEYS = ("internal_states", "host", "port", "last_gen_throughput")
REDACTED = "<redacted>"


def draftgen_version() -> str:
    try:
        return metadata.version("draftgen")
    except metadata.PackageNotFoundError:
        return "unknown"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def file_hashes(directory: str | Path | None, file_names: tuple[str, ...]) -> dict[str, str]:
    """sha256 of each of `file_names` present in `directory` (none when it is not readable here)."""
    if directory is None or not Path(directory).is_dir():
        return {}
    found = {}
    for name in file_names:
        path = Path(directory) / name
        if path.is_file():
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            found[name] = digest.hexdigest()
    return found


def server_facts(server_info: dict, secrets: list[str] = ()) -> dict:
    """What a server's `/server_info` says of how it generates: its version and its args, with the
    server's keys blanked wherever they appear (SGLang 0.5.23 answers them in clear in `api_key`,
    `admin_api_key` and `launch_command`; docs/security.md)."""
    return {k: redacted(v, secrets) for k, v in sorted(server_info.items()) if k not in VOLATILE_SERVER_KEYS}


def redacted(value, secrets: list[str]):
    """`value` with every occurrence of each secret replaced by REDACTED, in any string at any depth."""
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: redacted(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [redacted(v, secrets) for v in value]
    return value


# What must be the same in every session of every replica for a corpus to be of one target. The
# server's other args may differ by replica (ports, seeds, the GPUs it was given).
SAME_IN_EVERY_SESSION = ("server_version", "served_model", "model", "tokenizer", "chat_template_sha256",
                         "datasets", "prompt_classes")


def what_differs(sessions: list[dict]) -> list[str]:
    """The keys on which generation sessions (of any replica) disagree: a corpus made by two targets."""
    return [k for k in SAME_IN_EVERY_SESSION if len({repr(s.get(k)) for s in sessions}) > 1]
