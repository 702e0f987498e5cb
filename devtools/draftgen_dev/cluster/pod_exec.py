"""Run one container's command with the pod's volumes bind-mounted at their mountPaths.

Called by the local kubelet inside `unshare --mount --propagation private`, so the mounts are seen by
this process tree only:  python -m draftgen_dev.cluster.pod_exec --bind SRC:DST[:ro] ... -- CMD ARGS...
"""

from __future__ import annotations

import os
import subprocess
import sys


def main(argv: list[str]) -> int:
    split = argv.index("--")
    binds, cmd = argv[:split], argv[split + 1:]
    for i in range(0, len(binds), 2):
        assert binds[i] == "--bind", binds[i]
        src, dst, *opts = binds[i + 1].split(":")
        os.makedirs(dst, exist_ok=True)
        subprocess.run(["mount", "--bind", src, dst], check=True)
        if "ro" in opts:
            subprocess.run(["mount", "-o", "remount,bind,ro", dst], check=True)
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
