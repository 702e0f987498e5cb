"""Run one container's command with the pod's volumes bind-mounted at their mountPaths.

Called by the local kubelet inside `unshare --mount --propagation private`, so the mounts are seen by
this process tree only:  python -m draftgen_dev.cluster.pod_exec --bind SRC:DST[:ro] ... -- CMD ARGS...

Without `--root`, a container has no image: its command runs from this machine's Python environment
and the project's checkout. A volume mounted over a folder that holds them (the chart's emptyDir at
/tmp, over a checkout under /tmp) would hide the very program it is to run, so those folders are
mounted back, from a handle opened before, inside the volume (where an empty folder is left as the
mount point).

With `--root DIR --user UID:GID [--groups G,...] [--read-only-root] [--workdir W]`, it runs from a built image's root
(draftgen_dev.image) as a container runtime would: the volumes, /proc, /dev and /sys are mounted inside
that root, the root is made read-only for this container when its securityContext says so, then the
command runs chrooted there as the given user, with no capabilities left.
"""

from __future__ import annotations

import argparse
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


def parse(options: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="pod_exec")
    parser.add_argument("--bind", action="append", default=[], help="SRC:DST[:ro]")
    parser.add_argument("--root", help="run from this image root (chroot)")
    parser.add_argument("--user", default="0:0", help="UID:GID to run as, with --root")
    parser.add_argument("--groups", default="", help="supplementary group ids, comma-separated, with --root")
    parser.add_argument("--read-only-root", action="store_true")
    parser.add_argument("--workdir", default="/")
    args = parser.parse_args(options)
    args.binds = [(src, dst, opts) for src, dst, *opts in (b.split(":") for b in args.bind)]
    return args


def bind(src: str, dst: str, read_only: bool) -> None:
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    elif not os.path.exists(dst):  # a file is mounted over a file
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        open(dst, "a").close()
    subprocess.run(["mount", "--bind", src, dst], check=True)
    if read_only:
        subprocess.run(["mount", "-o", "remount,bind,ro", dst], check=True)


def run_here(binds: list[tuple[str, str, list[str]]], cmd: list[str]) -> None:
    kept = {path: os.open(path, os.O_PATH | os.O_DIRECTORY)
            for path in hidden_folders([dst for _, dst, _ in binds], runs_from())}
    for src, dst, opts in mount_order(binds):
        bind(src, dst, "ro" in opts)
    for path, handle in kept.items():
        # The handle still reaches the hidden folder; --no-canonicalize keeps mount from resolving it
        # to its path, which now names the folder inside the volume.
        os.makedirs(path, exist_ok=True)
        subprocess.run(["mount", "--no-canonicalize", "--bind", f"/proc/self/fd/{handle}", path], check=True,
                       pass_fds=[handle])
        os.close(handle)
    os.execvp(cmd[0], cmd)


def in_root(root: str, path: str) -> str:
    """`path` as seen from inside `root`, on this side of it: symlinks are followed with `root` as /
    (an image's /var/run links to /run, which must not reach this machine's /run)."""
    resolved, todo, hops = root, [p for p in path.split("/") if p], 0
    while todo:
        part = todo.pop(0)
        candidate = os.path.join(resolved, part)
        if os.path.islink(candidate) and (hops := hops + 1) < 40:
            target = os.readlink(candidate)
            todo = [p for p in target.split("/") if p] + todo
            resolved = root if target.startswith("/") else resolved
        elif part == "..":
            resolved = max(root, os.path.dirname(resolved), key=len)
        elif part != ".":
            resolved = candidate
    return resolved


def run_in_image(args: argparse.Namespace, cmd: list[str]) -> None:
    root = args.root.rstrip("/")
    # A mount of the root of this container's own, so making it read-only leaves the others' alone.
    subprocess.run(["mount", "--bind", root, root], check=True)
    for system in ("/proc", "/dev", "/sys"):
        os.makedirs(in_root(root, system), exist_ok=True)
        subprocess.run(["mount", "--rbind", system, in_root(root, system)], check=True)
    for src, dst, opts in sorted(args.binds, key=lambda b: b[1].rstrip("/").count("/")):  # /etc before /etc/x
        bind(src, in_root(root, dst), "ro" in opts)
    if args.read_only_root:
        subprocess.run(["mount", "-o", "remount,bind,ro", root], check=True)
    uid, gid = (int(i) for i in args.user.split(":"))
    os.chroot(root)
    os.chdir(args.workdir)
    os.setgroups([int(g) for g in args.groups.split(",") if g])
    os.setgid(gid)
    os.setuid(uid)  # a non-root uid drops every capability with it
    os.execvp(cmd[0], cmd)


def main(argv: list[str]) -> int:
    split = argv.index("--")
    args, cmd = parse(argv[:split]), argv[split + 1:]
    if args.root:
        run_in_image(args, cmd)
    else:
        run_here(args.binds, cmd)
    return 1  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
