"""`make lock`: pin every dependency the image installs, from pyproject.toml's ranges.

pip resolves the project as a fresh install would (`pip install --dry-run --ignore-installed --report`,
pip's own resolver, nothing installed), for this machine's Python and platform: the image's (Python
3.11, Linux x86_64). Two files, read by the Dockerfile:

    requirements/draftgen.lock  what the package needs, and the build backend it is built with
    requirements/torch.lock     torch and what it pulls in (PyPI's CUDA build), for TORCH=cuda|cpu

Both come from one resolution of `.[extract]` so a package both need has one version. Exact
versions, no hashes: TORCH=cpu installs the same torch version from PyTorch's CPU index, whose
wheels hash differently (docs/image.md#pinned-dependencies).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOCKS = REPO / "requirements"
HEADER = "# Made by `make lock` (devtools/draftgen_dev/lock.py) from pyproject.toml; do not edit by hand.\n"


def resolved(requirement: str, constraints: Path | None = None) -> dict[str, str]:
    """name -> version of everything a fresh `pip install requirement` would install."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                        "--report", str(report), *(["-c", str(constraints)] if constraints else []), requirement],
                       check=True, cwd=REPO)
        found = json.loads(report.read_text())["install"]
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in found
            if i["metadata"]["name"].lower() != "draftgen"}


def build_backend() -> list[str]:
    """The build system's requirements (setuptools, wheel): the image builds the package without
    build isolation, from these pinned versions."""
    return tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]


def lock_text(pins: dict[str, str]) -> str:
    return HEADER + "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        everything = resolved(".[extract]")
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text(lock_text(everything))
        base = resolved(".", constraints)
        for requirement in build_backend():
            base.update(resolved(requirement, constraints))
    torch = {name: version for name, version in everything.items() if name not in base}
    LOCKS.mkdir(exist_ok=True)
    (LOCKS / "draftgen.lock").write_text(lock_text(base))
    (LOCKS / "torch.lock").write_text(lock_text(torch))
    print(f"requirements/draftgen.lock: {len(base)} packages; requirements/torch.lock: {len(torch)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
