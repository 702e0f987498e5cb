"""Whether a model folder asks to run the Python it ships, and the preflight's refusal when the spec
does not allow it (docs/security.md#remote-code).

transformers decides: a folder whose `auto_map` names a class transformers has no code of its own for
(Kimi-K2.5's tiktoken tokenizer, its `kimi_k25` config) loads only with `trust_remote_code=True`, and
refuses otherwise with a ValueError that names the argument (transformers 5.25 `dynamic_module_utils.
resolve_trust_remote_code`). An `auto_map` beside a model type transformers knows loads with its own
code and needs nothing. So the preflight loads the config and the tokenizer as the pods will, and
only a refusal says which file asked and which field allows it.
"""

from __future__ import annotations

import json
from pathlib import Path

from .problem import PreflightProblem

FIELD = "spec.model.trustRemoteCode"
# Where a checkpoint's auto_map lives: its model config, its tokenizer's config.
ASKING_FILES = ("tokenizer_config.json", "config.json")


def is_remote_code_refusal(error: BaseException) -> bool:
    """transformers' refusal to load a folder's own code without trust_remote_code=True."""
    return isinstance(error, ValueError) and "trust_remote_code" in str(error)


def auto_map_of(path: Path) -> str | None:
    """What a JSON file's auto_map names ("AutoTokenizer: tokenization_kimi.TikTokenTokenizer"), if it has one."""
    try:
        auto_map = json.loads(path.read_text()).get("auto_map")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(auto_map, dict) or not auto_map:
        return None
    return ", ".join(f"{k}: {' / '.join(str(c) for c in v if c) if isinstance(v, list) else v}"
                     for k, v in auto_map.items())


def refusal(folder: str | Path, files: tuple[str, ...] = ASKING_FILES) -> PreflightProblem:
    """The problem a remote-code refusal makes: the first of `files` in `folder` whose auto_map asked,
    what it names, and the field that allows it."""
    asked = next(((Path(folder) / f, names) for f in files if (names := auto_map_of(Path(folder) / f))), None)
    where, names = (str(asked[0]), asked[1]) if asked else (str(folder), "classes of its own")
    return PreflightProblem(where, f"auto_map asks to run Python from the model folder ({names}), and {FIELD} is "
                                   f"false: set {FIELD}: true to allow it (that code then runs in draftgen's pods "
                                   "and the server; docs/security.md#remote-code)")


def check_config_trust(model_dir: str, trust_remote_code: bool) -> None:
    """A refusal when the model's config needs its own code and the spec does not allow it. The config
    is loaded as the server and transformers' extraction load it (no weights: seconds). Any other
    failure is not the preflight's to judge: SGLang carries config classes of its own for model types
    the image's transformers may not know, and the facts the preflight needs come from config.json."""
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(model_dir, trust_remote_code=trust_remote_code)
    except Exception as e:
        if is_remote_code_refusal(e):
            raise refusal(model_dir, ("config.json",)) from None
