"""Run one container's command with the pod's volumes bind-mounted at their mountPaths.

Called by the local kubelet inside `unshare --mount --propagation private`, so the mounts are seen by
this process tree only:  python -m draftgen_dev.cluster.pod_exec --bind SRC:DST[:ro] ... -- CMD ARGS...
"""

from __future__ import annotations

import os
import subprocess
import sys


def mount_order(binds: list[tuple[str, str, list[str]]]) -> list[tuple[str, str, list[str]]]:
    """Mounts that would hide another mount's source (an emptyDir at /tmp over a source under /tmp)
    go last, so every source is still visible when it is mounted."""
    def hides(dst: str, src: str) -> bool:
        return src == dst or src.startswith(dst.rstrip("/") + "/")
    return sorted(binds, key=lambda b: any(hides(b[1], other[0]) for other in binds if other is not b))


def main(argv: list[str]) -> int:
    split = argv.index("--")
    args, cmd = argv[:split], argv[split + 1:]
    binds = []
    for i in range(0, len(args), 2):
        assert args[i] == "--bind", args[i]
        src, dst, *opts = args[i + 1].split(":")
        binds.append((src, dst, opts))
    for src, dst, opts in mount_order(binds):
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        elif not os.path.exists(dst):  # a file is mounted over a file
            open(dst, "a").close()
        subprocess.run(["mount", "--bind", src, dst], check=True)
        if "ro" in opts:
            subprocess.run(["mount", "-o", "remount,bind,ro", dst], check=True)
    os.execvp(cmd[0], cmd)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
