"""transformers without torch, for the commands that only tokenize (`preflight`, `generate`).

transformers 5 imports torch as soon as its configuration module loads (`configuration_utils` imports
`modeling_rope_utils`, which imports torch when it is installed), and `AutoTokenizer` loads it: about
two CPU seconds of every process start, for a command that never builds a tensor (docs/testing.md).
transformers decides once per process whether torch is there (`is_torch_available`, cached in
`transformers/utils/import_utils.py`) and then takes its tokenizers-only path, the one an install without
torch gets: the same tokenizer classes, remote code included, the same ids (`tokenizers_only_test.py`
compares them with a process that has torch).

Marking torch absent (`sys.modules["torch"] = None`) makes `importlib.util.find_spec("torch")` answer
None, so transformers finds no torch. It must happen before transformers is imported; in a process
that has already imported either, it does nothing. A tokenizer whose own code (auto_map) imports torch
still loads: `load_tokenizer` lets torch in and loads it again (transformers keeps its first answer).
"""

from __future__ import annotations

import logging
import sys

# transformers says this once at import when it finds no torch; here it is the point, not a warning.
NO_TORCH_NOTICE = "PyTorch was not found"


def _not_the_notice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(NO_TORCH_NOTICE)


def hide_torch() -> bool:
    """Mark torch absent for this process, if neither torch nor transformers is imported yet.
    True when it did."""
    if "torch" in sys.modules or "transformers" in sys.modules:
        return False
    sys.modules["torch"] = None  # type: ignore[assignment]
    logging.getLogger("transformers").addFilter(_not_the_notice)
    return True


def torch_hidden() -> bool:
    return "torch" in sys.modules and sys.modules["torch"] is None


def let_torch_in() -> None:
    """Undo `hide_torch`, for code that imports torch itself (a tokenizer's remote code)."""
    if torch_hidden():
        del sys.modules["torch"]
