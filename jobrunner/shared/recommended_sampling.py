"""The sampling a model's authors recommend, from its `generation_config.json`, as the default of every
dataset that does not set its own (key by key): how the model will be served, so what a drafter
should learn from (docs/sglang.md#sampling-defaults).

SGLang 0.5.23 applies these keys from that file to its OpenAI-compatible routes only: a native
`/generate` request without them gets SGLang's own defaults (temperature 1.0, top_p 1.0), with or
without `--sampling-defaults model` (measured on the real server,
tests/real_sglang/test_kimi_like_on_real_sglang.py; the keys are those of
`ModelConfig.get_default_sampling_params`, sglang/srt/configs/model_config.py 0.5.23). draftgen
sends `/generate`, so it fills them in itself.
"""

from __future__ import annotations

import json
from pathlib import Path

from draftgen_contracts.generate_config import DatasetConfig, GenerateConfig
from draftgen_contracts.sglang_protocol import InvalidSamplingParams, validate_sampling_params

# The keys SGLang takes from generation_config.json (the rest of that file is not sampling).
KEYS = ("repetition_penalty", "temperature", "top_k", "top_p", "min_p")
FILE = "generation_config.json"


def recommended_sampling(model_dir: str | Path | None) -> dict:
    """The KEYS the model folder's generation_config.json sets, each only when SGLang would take its
    value; {} without the file."""
    if model_dir is None:
        return {}
    try:
        document = json.loads((Path(model_dir) / FILE).read_text())
    except (OSError, ValueError):
        return {}
    found = {}
    for key in KEYS:
        if isinstance(document, dict) and document.get(key) is not None:
            try:
                found.update(validate_sampling_params({key: document[key]}))
            except InvalidSamplingParams:
                continue  # a value SGLang would refuse is no recommendation to send
    return found


def with_recommended_sampling(config: GenerateConfig) -> GenerateConfig:
    """The config with every dataset's sampling_params over the model's recommendation."""
    recommended = recommended_sampling(config.model_path)
    if not recommended:
        return config
    return config.model_copy(update={"datasets": [_over(d, recommended) for d in config.datasets]})


def _over(dataset: DatasetConfig, recommended: dict) -> DatasetConfig:
    return dataset.model_copy(update={"sampling_params": {**recommended, **dataset.sampling_params}})
