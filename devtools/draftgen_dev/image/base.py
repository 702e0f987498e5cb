"""The Debian base the tests build draftgen's image on: Debian 12 (bookworm, Python 3.11) from
Debian's own packages with mmdebstrap, imported into our store. It stands in for the Dockerfile's
public default (python:3.11-slim-bookworm), which cannot be pulled here: same Debian release, same
Python minor version."""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
from pathlib import Path

from .buildah import buildah, has_image

SUITE = "bookworm"
PACKAGES = ("python3", "python3-venv", "python3-pip", "ca-certificates")


def base_ref() -> str:
    digest = hashlib.sha256(" ".join([SUITE, *PACKAGES]).encode()).hexdigest()[:12]
    return f"localhost/draftgen-base:{SUITE}-{digest}"


def ensure_base() -> str:
    """The base image's reference, made once per machine (about 30 s)."""
    ref = base_ref()
    if has_image(ref):
        return ref
    with tempfile.TemporaryDirectory() as tmp:
        tar = Path(tmp) / "rootfs.tar"
        subprocess.run(["mmdebstrap", "--quiet", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(tar)],
                       check=True)
        container = buildah("from", "scratch").strip()
        try:
            buildah("add", container, str(tar), "/")
            buildah("config", "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", container)
            buildah("commit", "--quiet", container, ref)
        finally:
            buildah("rm", container)
    return ref
