"""Which token ids end a response, as SGLang 0.5.23 decides it, so that a response cut at the budget
whose last kept id is one of them is written as the complete response it is (`stop`).

SGLang stops a request at a generated id that is in the request's `stop_token_ids`, the model's
`eos_token_id` (config.json, united with generation_config.json's: `ModelConfig._get_hf_eos_token_id`
in python/sglang/srt/configs/model_config.py) or the tokenizer's `eos_token_id`, and at none of them
when `ignore_eos` is set (`Req._check_token_based_finish`, python/sglang/srt/managers/schedule_batch.py).
The step in which an abort lands skips those checks (`Req.update_finish_state` returns on `to_finish`
first), so the answer to a cut may end with an end token the server did not see as one.

Stop strings are not covered: telling them needs the detokenized text."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from jobrunner.preflight.model_facts import TEXT_CONFIG_KEYS


def ids_of(value: Any) -> set[int]:
    """An `eos_token_id` as configs write it: one id, a list of them, or nothing."""
    if isinstance(value, bool):
        return set()
    if isinstance(value, int):
        return {value}
    if isinstance(value, list):
        return {v for v in value if isinstance(v, int) and not isinstance(v, bool)}
    return set()


def config_end_ids(model_dir: str | Path) -> set[int]:
    """The model's end ids from config.json (its text model's too) and generation_config.json; an
    unreadable or missing file says nothing."""
    found: set[int] = set()
    for name in ("config.json", "generation_config.json"):
        try:
            config = json.loads((Path(model_dir) / name).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(config, dict):
            found |= ids_of(config.get("eos_token_id"))
            for key in TEXT_CONFIG_KEYS:
                if isinstance(config.get(key), dict):
                    found |= ids_of(config[key].get("eos_token_id"))
    return found


def model_end_ids(model_dir: str | Path | None, tokenizer: Any) -> frozenset[int]:
    """What ends every response of the model: its configs' end ids and its tokenizer's."""
    found = config_end_ids(model_dir) if model_dir else set()
    if tokenizer is not None:
        found |= ids_of(getattr(tokenizer, "eos_token_id", None))
    return frozenset(found)


def request_end_ids(sampling_params: Mapping[str, Any], model_ids: Iterable[int]) -> frozenset[int]:
    """What ends a response to a request sent with `sampling_params`."""
    if sampling_params.get("ignore_eos"):
        return frozenset()
    return frozenset(model_ids) | ids_of(sampling_params.get("stop_token_ids"))


def ends_complete(output_ids: list[int], end_ids: frozenset[int]) -> bool:
    """Whether a response ends where the server would have stopped it: on an end id."""
    return bool(output_ids) and output_ids[-1] in end_ids
