"""The trainers' own code, installed for the tests alone: specforge 0.2.0, speculators 0.9.0 and the
hs-connectors 0.9.0 speculators reads hidden states with, as published on PyPI (and the small
libraries the trainers' command lines import: accelerate for SpecForge's, three for speculators').

Their wheels are pure Python, but their requirements are a GPU training stack (sglang, vLLM,
flash-attn, mooncake, pinned torch and transformers). The tests need only the modules that read
the formats, which import torch, safetensors, datasets and openai, all in the test environment.
So the wheels are installed with `pip install --no-deps --target` into a cache folder and put on
sys.path of the test process only; nothing of them is committed or installed into the venv.

Cache: `<cache root>/trainer-packages-<versions>/` with a `.complete` marker, built in a temporary
folder beside it and renamed into place (the cache root of the control-plane binaries:
$DRAFTGEN_CACHE, else ~/.cache/draftgen).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# pydantic-settings, python-dotenv and loguru: what speculators' training CLI module imports besides
# the test environment (its vocabulary-mapping loader, tests/trainers/test_trainer_loaders.py);
# accelerate: what `specforge train` imports (specforge/cli.py `_train`, its seed).
PACKAGES = ("specforge==0.2.0", "speculators==0.9.0", "hs-connectors==0.9.0", "pydantic-settings==2.16.3",
            "python-dotenv==1.2.4", "loguru==0.7.3", "accelerate==1.16.0")
MARKER = ".complete"
PIP_TIMEOUT_S = 600


def cache_root() -> Path:
    return Path(os.environ.get("DRAFTGEN_CACHE", Path.home() / ".cache" / "draftgen")).expanduser()


def trainer_packages() -> Path:
    """The folder holding the trainers' packages, installed once per machine."""
    entry = cache_root() / ("trainer-packages-" + "-".join(p.replace("==", "") for p in PACKAGES))
    if (entry / MARKER).exists():
        return entry
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=entry.name + ".", dir=entry.parent))
    try:
        cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-input", "--quiet", "--target", str(tmp),
               *PACKAGES]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"pip could not install {' '.join(PACKAGES)}:\n{(done.stdout + done.stderr)[-2000:]}")
        (tmp / MARKER).write_text("\n".join(PACKAGES) + "\n")
        shutil.rmtree(entry, ignore_errors=True)
        os.replace(tmp, entry)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return entry


def use_trainer_packages() -> None:
    """Make specforge, speculators and hs_connectors importable in this process."""
    path = str(trainer_packages())
    if path not in sys.path:
        sys.path.append(path)  # after the venv: their pinned requirements never shadow ours
