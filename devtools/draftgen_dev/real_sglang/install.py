"""The cached virtual environment that holds the real SGLang and the CPU platform plugin.

`<cache root>/sglang-server-<version>/` (the control-plane binaries' cache root): built in place, because a
venv cannot be moved, and marked complete last, so a half-built one (an interrupted pip) is
recognised and built again. The plugin's own files are hashed into the marker: a changed plugin is
reinstalled without reinstalling SGLang (about 11 GB, 4-7 minutes cold).
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

from draftgen_dev.cluster.binaries import cache_root

SGLANG_VERSION = "0.5.23"
PLUGIN = Path(__file__).resolve().parents[2] / "sglang_cpu_platform"
PLATFORM_NAME = "draftgen_cpu"  # its entry point in the group sglang.srt.platforms
MARKER = ".draftgen-complete"
PIP_TIMEOUT_S = 1800


def venv_dir() -> Path:
    # Not "sglang-<version>": that is the entry of SGLang's request validator (tests/sglang).
    return cache_root() / f"sglang-server-{SGLANG_VERSION}"


def plugin_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in PLUGIN.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                       and ".egg-info" not in str(p) and "build" not in p.relative_to(PLUGIN).parts):
        digest.update(str(path.relative_to(PLUGIN)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def marker_text() -> str:
    return f"sglang=={SGLANG_VERSION} plugin={plugin_hash()}\n"


def _pip(venv: Path, *args: str) -> None:
    cmd = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-input", "--quiet", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")


def ensure_installed() -> Path:
    """The venv's python, with sglang and the plugin installed; builds what is missing, once per
    machine (a lock keeps two test processes from building it together)."""
    venv = venv_dir()
    python = venv / "bin" / "python"
    if (venv / MARKER).exists() and (venv / MARKER).read_text() == marker_text():
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = venv / MARKER
        if marker.exists() and marker.read_text() == marker_text():
            return python
        started = time.monotonic()
        has_sglang = marker.exists() and marker.read_text().startswith(f"sglang=={SGLANG_VERSION} ")
        if not has_sglang:
            print(f"[draftgen] installing sglang=={SGLANG_VERSION} into {venv} (once per machine, about "
                  "11 GB and 4-7 minutes)", file=sys.stderr, flush=True)
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            _pip(venv, "--upgrade", "pip")
            # Not compiled at install: 35,000 files, 85 CPU seconds, of which a server start imports a
            # part, compiled on its first import instead (cold `make demo` is CPU-bound; docs/testing.md).
            _pip(venv, "--no-compile", f"sglang=={SGLANG_VERSION}")
        marker.unlink(missing_ok=True)
        # Copied, not editable: the cache must not depend on which checkout built it.
        _pip(venv, "--no-deps", "--force-reinstall", str(PLUGIN))
        shutil.rmtree(PLUGIN / "build", ignore_errors=True)
        for egg in PLUGIN.glob("*.egg-info"):
            shutil.rmtree(egg, ignore_errors=True)
        marker.write_text(marker_text())
        print(f"[draftgen] sglang venv ready in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)
    return python


if __name__ == "__main__":
    print(ensure_installed())
