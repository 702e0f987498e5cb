"""`python -m draftgen_dev.cluster up|down|nodes` (what `make cluster` and `make cluster-down` run).

`up` starts the local control plane detached, prints its KUBECONFIG path and returns; `down` stops
every component by the PIDs recorded in the state folder.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from .binaries import KUBECTL_HELM, BuildError, ensure
from .controlplane import ClusterError, LocalCluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m draftgen_dev.cluster", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down", "nodes"])
    parser.add_argument("--state-dir", type=Path, default=Path(".cluster"))
    args = parser.parse_args(argv)
    state = args.state_dir.resolve()
    if args.command == "up":
        if (state / "state.json").exists():
            print(state / "kubeconfig")
            return 0
        if state.exists():
            shutil.rmtree(state)
        try:
            LocalCluster(state).start()
        except (BuildError, ClusterError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(state / "kubeconfig")
    elif args.command == "down":
        if not (state / "state.json").exists():
            print("no local cluster is running", file=sys.stderr)
            return 0
        LocalCluster.attach(state).stop()
        print("local cluster stopped")
    else:
        kubectl = ensure(KUBECTL_HELM) / "kubectl"
        return subprocess.call([str(kubectl), "--kubeconfig", str(state / "kubeconfig"), "get", "nodes", "-o",
                                "custom-columns=NAME:.metadata.name,GPUS:.status.allocatable.nvidia\\.com/gpu,"
                                "PRODUCT:.metadata.labels.nvidia\\.com/gpu\\.product,"
                                "TAINTS:.spec.taints[*].key"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
