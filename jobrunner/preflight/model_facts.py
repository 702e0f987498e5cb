"""What preflight reads of the model before any GPU: its `config.json` (the text model's, where a
multimodal wrapper nests it under `text_config`, as Kimi-K2.5's does) and its tokenizer's chat
template and special tokens."""

from __future__ import annotations

import json
from pathlib import Path

from draftgen_contracts.preflight_report import ModelReport

from .problem import PreflightProblem

# The keys that hold the text model's config in multimodal wrappers (transformers'
# PretrainedConfig.get_text_config looks under the same names).
TEXT_CONFIG_KEYS = ("text_config", "language_config", "llm_config")


class ModelFacts(ModelReport):
    """The findings' model facts (`context_length`: max_position_embeddings, None when the config does
    not say), and for people where the text model's config sat."""

    text_config_key: str | None = None  # "text_config" and the like; None at the top


def model_facts(model_dir: str | Path) -> ModelFacts:
    path = Path(model_dir) / "config.json"
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        raise PreflightProblem(str(path), "not found: the model folder needs its config.json") from None
    except (OSError, ValueError) as e:
        raise PreflightProblem(str(path), f"not readable as JSON: {e}") from None
    key = next((k for k in TEXT_CONFIG_KEYS if isinstance(config.get(k), dict)), None)
    text = config[key] if key else config
    missing = [k for k in ("hidden_size", "num_hidden_layers", "vocab_size") if not isinstance(text.get(k), int)]
    if missing:
        where = f"{path}: {key + '.' if key else ''}"
        raise PreflightProblem(str(path), f"{where}{', '.join(missing)} missing or not an integer")
    architectures = config.get("architectures") or text.get("architectures") or ["unknown"]
    return ModelFacts(architecture=str(architectures[0]), hidden_size=text["hidden_size"],
                      num_layers=text["num_hidden_layers"], vocab_size=text["vocab_size"],
                      context_length=text.get("max_position_embeddings"), text_config_key=key)
