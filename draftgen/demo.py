"""`make demo`: start the local control plane and show its GPU nodes (grows into a full DatasetGeneration run)."""

from __future__ import annotations

import subprocess
import sys
import tempfile

from draftgen.cluster.binaries import KUBECTL_HELM, ensure
from draftgen.cluster.controlplane import LocalCluster


def main() -> int:
    with LocalCluster(tempfile.mkdtemp(prefix="draftgen-demo-")) as cluster:
        kubectl = str(ensure(KUBECTL_HELM) / "kubectl")
        return subprocess.call([kubectl, "--kubeconfig", str(cluster.kubeconfig), "get", "nodes", "-L",
                                "nvidia.com/gpu.product,nvidia.com/gpu.count"])


if __name__ == "__main__":
    sys.exit(main())
