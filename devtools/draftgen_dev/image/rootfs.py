"""A built image's root, mounted, with what its configuration says a container starts with.

The tests run the image's programs as a container runtime would: chroot into this root as the
image's user, with the pod's volumes bind-mounted and the root read-only (cluster/pod_exec does it).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .buildah import buildah


@dataclass(frozen=True)
class ImageRoot:
    ref: str
    root: Path
    env: dict[str, str]  # the image's ENV
    user: str            # the image's USER, "uid:gid"
    workdir: str

    def as_json(self) -> dict:
        """What LocalCluster.load_image takes."""
        return {"root": str(self.root), "env": self.env, "user": self.user, "workdir": self.workdir}

    def argv(self, cmd: list[str], binds: dict[str, str], read_only_root: bool = True) -> list[str]:
        """`cmd` run as a pod's container runs from this image: its user, `binds` (folder here -> path
        in the container, ":ro" after the path to mount it read-only), its root read-only; run it
        with `env` (the image's ENV and what the container adds)."""
        mounts = [arg for src, dst in binds.items() for arg in ("--bind", f"{src}:{dst}")]
        return ["unshare", "--mount", "--propagation", "private", sys.executable, "-m", "draftgen_dev.cluster.pod_exec",
                "--root", str(self.root), "--user", self.user, "--workdir", self.workdir,
                *(["--read-only-root"] if read_only_root else []), *mounts, "--", *cmd]


def image_config(ref: str) -> dict:
    return json.loads(buildah("inspect", "--type", "image", ref))["OCIv1"]["config"]


def user_ids(user: str) -> str:
    """The image's USER as "uid:gid" (root when it names none; a gid of the uid's when it names none)."""
    uid, _, gid = (user or "0").partition(":")
    return f"{uid}:{gid or uid}"


def remove_orphans() -> None:
    """Working containers left by a process that was killed before it could remove its own."""
    for name in buildah("containers", "--format", "{{.ContainerName}}").split():
        if name.startswith("draftgen-root-") and not os.path.exists(f"/proc/{name.rsplit('-', 1)[1]}"):
            buildah("rm", name)


def working_container(ref: str, owner: int) -> str:
    return f"draftgen-root-{hashlib.sha256(ref.encode()).hexdigest()[:12]}-{owner}"


def mount(ref: str, owner: int) -> ImageRoot:
    """The image's root, mounted read-write (each container makes its own read-only view of it) in a
    working container of `owner`'s (a process id): made once, then found again by every process that
    mounts it for the same owner (the workers of one test run), until `unmount`. Callers that may
    race take a lock around it."""
    remove_orphans()
    name = working_container(ref, owner)
    if name not in buildah("containers", "--format", "{{.ContainerName}}").split():
        buildah("from", "--pull-never", "--name", name, ref)
    root = Path(buildah("mount", name).strip())
    config = image_config(ref)
    env = dict(item.split("=", 1) for item in config.get("Env") or [])
    return ImageRoot(ref, root, env, user_ids(config.get("User", "")), config.get("WorkingDir") or "/")


def unmount(ref: str, owner: int) -> None:
    name = working_container(ref, owner)
    if name in buildah("containers", "--format", "{{.ContainerName}}").split():
        buildah("umount", name)
        buildah("rm", name)
