"""draftgen's image, built from the Dockerfile on the Debian base, kept by the hash of what it copies.

`python -m draftgen_dev.image` (what `make image` and `make test` run) builds it unless an image of the
same content is in the store, and prints its reference; `--torch cuda|cpu|none` picks the variant
(the Dockerfile's TORCH). The tests run the `cuda` variant, the one whose extraction works with the
default backend (its torch runs on CPUs too).
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import sys
import time
from pathlib import Path

from draftgen_contracts.provenance import draftgen_version

from .base import ensure_base
from .buildah import buildah, ensure_tools, has_image

REPO = Path(__file__).resolve().parents[3]
# What the Dockerfile copies; .dockerignore's patterns leave files out of it.
COPIED = ("Dockerfile", ".dockerignore", "requirements", "pyproject.toml", "README.md", "draftgen_contracts",
          "draftgen_simulator", "draftgen", "jobrunner", "draftgen_operator")
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def ignored_patterns() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def is_ignored(relative: str, patterns: list[str]) -> bool:
    """Whether .dockerignore leaves this path out (its `**/` patterns match at any depth)."""
    parts = relative.split("/")
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        if fnmatch.fnmatch(relative, pattern) or any(fnmatch.fnmatch(p, bare) for p in parts):
            return True
    return False


def copied_files() -> list[Path]:
    patterns = ignored_patterns()
    files = []
    for top in COPIED:
        path = REPO / top
        for f in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if f.is_file() and not is_ignored(str(f.relative_to(REPO)), patterns):
                files.append(f)
    return files


def content_hash(torch: str, base: str) -> str:
    digest = hashlib.sha256(f"{torch}\0{base}\0".encode())
    for f in copied_files():
        digest.update(str(f.relative_to(REPO)).encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def image_ref(torch: str = "cuda") -> str:
    """The reference of the image this checkout builds: `localhost/draftgen:<version>-<torch>-<hash>`."""
    ensure_tools()
    base = ensure_base()
    return f"localhost/draftgen:{draftgen_version()}-{torch}-{content_hash(torch, base)}"


def ensure_image(torch: str = "cuda") -> str:
    """Build the image unless the store holds one of the same content; its reference. Older builds of
    the same variant are untagged and their layers pruned, so the store holds one of each."""
    ref = image_ref(torch)
    if has_image(ref):
        return ref
    started = time.monotonic()
    # The default variant is also `localhost/draftgen:<version>`: the operator's default runner image.
    alias = ["--tag", f"localhost/draftgen:{draftgen_version()}"] if torch == "cuda" else []
    buildah("bud", "--quiet", "--layers", "--isolation", "chroot", "--build-arg", f"BASE={ensure_base()}",
            "--build-arg", f"TORCH={torch}", "--volume", f"{CA_BUNDLE}:{CA_BUNDLE}:ro", "--tag", ref, *alias,
            str(REPO), capture=False)
    for old in buildah("images", "--format", "{{.Name}}:{{.Tag}}", "--filter", "reference=localhost/draftgen").split():
        if old.startswith(f"localhost/draftgen:{draftgen_version()}-{torch}-") and old != ref:
            buildah("rmi", old)
    buildah("rmi", "--prune")
    print(f"built {ref} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return ref


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m draftgen_dev.image")
    parser.add_argument("--torch", choices=("cuda", "cpu", "none"), default="cuda")
    ref = ensure_image(parser.parse_args(argv).torch)
    size = buildah("images", "--format", "{{.Size}}", ref).splitlines()[0]
    print(f"{ref} ({size})")
    return 0
