"""This generate process's session in its replica's provenance file (draftgen_contracts.provenance):
written once the server answers, before the first request, so no sample exists without it."""

from __future__ import annotations

import json
import time
from pathlib import Path

from draftgen_contracts import names, provenance
from jobrunner.shared.atomic import write_json_atomically
from jobrunner.shared.config import GenerateConfig
from jobrunner.shared.recommended_sampling import recommended_sampling


def session(config: GenerateConfig, server_info: dict, tokenizer=None, server_error: str | None = None,
            secrets: list[str] = ()) -> dict:
    """What this process generates with: the server, the model's and tokenizer's files, the chat
    template and every dataset's request settings."""
    template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
    served_model = server_info.get("model_path")
    return {
        "started_at": round(time.time(), 3), "draftgen_version": provenance.draftgen_version(),
        "replica": config.replica, "replicas": config.replicas,
        "server_version": server_info.get("version"), "served_model": served_model,
        "server": provenance.server_facts(server_info, secrets), **({"server_error": server_error} if server_error else {}),
        "model": provenance.file_hashes(served_model, provenance.MODEL_FILES),
        "tokenizer": {"path": config.tokenizer_path,
                      "files": provenance.file_hashes(config.tokenizer_path, provenance.TOKENIZER_FILES)},
        "chat_template_sha256": provenance.sha256_text(template) if isinstance(template, str) else None,
        "prompt_classes": [c.model_dump() for c in config.prompt_classes],
        # The model's own recommendation, which each dataset's sampling_params below includes where it set none.
        "recommended_sampling": recommended_sampling(config.model_path),
        "datasets": {d.name: {"chat_template_kwargs": config.template_kwargs_for(d),
                              "sampling_params": d.sampling_params, "max_new_tokens": d.max_new_tokens,
                              "prompt_class": d.prompt_class, "pretokenized": d.pretokenized}
                     for d in config.datasets},
    }


def record_session(output_root: str | Path, replica: int, entry: dict) -> Path:
    """Append `entry` to the replica's sessions (atomically: a crash leaves the old list or the new)."""
    path = Path(output_root) / names.GENERATE_DIR / names.provenance_file_name(replica)
    path.parent.mkdir(parents=True, exist_ok=True)
    sessions = json.loads(path.read_text())["sessions"] if path.exists() else []
    write_json_atomically(path, {"sessions": [*sessions, entry]})
    return path
