"""buildah on draftgen's own container store (never the machine's), and its install."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

STORE = Path.home() / ".cache" / "draftgen" / "containers"
# Mount and lock state: under /run, which a reboot empties, as the mounts it records are gone then.
RUN_ROOT = Path("/run/draftgen-containers")
TOOLS = {"buildah": "buildah", "mmdebstrap": "mmdebstrap"}  # command -> Debian package


def ensure_tools() -> None:
    """Install buildah and mmdebstrap from Debian's packages where missing (a fresh CI machine)."""
    missing = [package for command, package in TOOLS.items() if shutil.which(command) is None]
    if not missing:
        return
    install = ["apt-get", "install", "-y", "-q", *missing]
    if subprocess.run(install, stdout=subprocess.DEVNULL).returncode != 0:  # a fresh machine's lists may be empty
        subprocess.run(["apt-get", "update", "-q"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(install, check=True, stdout=subprocess.DEVNULL)


def buildah(*args: str, capture: bool = True) -> str:
    """Run buildah on our store; its standard output."""
    cmd = ["buildah", "--root", str(STORE / "storage"), "--runroot", str(RUN_ROOT), "--storage-driver", "overlay",
           *args]
    done = subprocess.run(cmd, check=False, text=True, stdout=subprocess.PIPE if capture else None,
                          stderr=subprocess.PIPE if capture else None)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{(done.stderr or '')[-4000:]}")
    return done.stdout or ""


def has_image(ref: str) -> bool:
    return bool(buildah("images", "--quiet", "--filter", f"reference={ref}").strip())
