"""Run one container's command with the pod's volumes bind-mounted at their mountPaths.

Called by the local kubelet inside `unshare --mount --propagation private`, so the mounts are seen by
this process tree only:  python -m draftgen_dev.cluster.pod_exec --bind SRC:DST[:ro] ... -- CMD ARGS...

A container here has no image: its command runs from this machine's Python environment and the
project's checkout. A volume mounted over a folder that holds them (the chart's emptyDir at /tmp, over
a checkout under /tmp) would hide the very program it is to run, so those folders are mounted back,
from a handle opened before, inside the volume (where an empty folder is left as the mount point).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from urllib.parse import unquote, urlparse


def mount_order(binds: list[tuple[str, str, list[str]]]) -> list[tuple[str, str, list[str]]]:
    """Mounts that would hide another mount's source (an emptyDir at /tmp over a source under /tmp)
    go last, so every source is still visible when it is mounted."""
    def hides(dst: str, src: str) -> bool:
        return src == dst or src.startswith(dst.rstrip("/") + "/")
    return sorted(binds, key=lambda b: any(hides(b[1], other[0]) for other in binds if other is not b))


def runs_from() -> list[str]:
    """The host folders a container's process runs from: this Python environment and every editable
    install's source folder (the project's checkout)."""
    folders = {sys.prefix, sys.base_prefix}
    for dist in importlib.metadata.distributions():
        url = json.loads(dist.read_text("direct_url.json") or "{}")
        if url.get("dir_info", {}).get("editable") and url["url"].startswith("file://"):
            folders.add(unquote(urlparse(url["url"]).path))
    return sorted(folders)


def hidden_folders(mount_paths: list[str], needed: list[str]) -> list[str]:
    """The needed folders that a mount would hide (each lies under a mount path), outermost only: one
    inside another comes back with it."""
    def under(path: str, top: str) -> bool:
        return path.startswith(top.rstrip("/") + "/")
    hidden = sorted({n for n in needed if any(under(n, m) for m in mount_paths)})
    return [h for h in hidden if not any(under(h, other) for other in hidden if other != h)]


def main(argv: list[str]) -> int:
    split = argv.index("--")
    args, cmd = argv[:split], argv[split + 1:]
    binds = []
    for i in range(0, len(args), 2):
        assert args[i] == "--bind", args[i]
        src, dst, *opts = args[i + 1].split(":")
        binds.append((src, dst, opts))
    kept = {path: os.open(path, os.O_PATH | os.O_DIRECTORY)
            for path in hidden_folders([dst for _, dst, _ in binds], runs_from())}
    for src, dst, opts in mount_order(binds):
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        elif not os.path.exists(dst):  # a file is mounted over a file
            open(dst, "a").close()
        subprocess.run(["mount", "--bind", src, dst], check=True)
        if "ro" in opts:
            subprocess.run(["mount", "-o", "remount,bind,ro", dst], check=True)
    for path, handle in kept.items():
        # The handle still reaches the hidden folder; --no-canonicalize keeps mount from resolving it
        # to its path, which now names the folder inside the volume.
        os.makedirs(path, exist_ok=True)
        subprocess.run(["mount", "--no-canonicalize", "--bind", f"/proc/self/fd/{handle}", path], check=True,
                       pass_fds=[handle])
        os.close(handle)
    os.execvp(cmd[0], cmd)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
