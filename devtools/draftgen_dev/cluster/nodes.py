"""KWOK fake nodes: by default two GPU servers shaped like 8x RTX PRO 6000 machines and one CPU node.

The GPU labels are those NVIDIA's GPU feature discovery puts on real nodes, so node selectors written
for a real cluster select these nodes too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

GPU_RESOURCE = "nvidia.com/gpu"
RTX_PRO_6000 = "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"


@dataclass(frozen=True)
class NodeShape:
    name_prefix: str
    count: int
    cpu: str
    memory: str
    gpus: int = 0
    gpu_product: str = RTX_PRO_6000
    gpu_memory_mib: int = 97887
    pods: int = 110
    extra_labels: dict[str, str] = field(default_factory=dict)


def default_node_shapes(gpu_nodes: int = 2, cpu_nodes: int = 1) -> list[NodeShape]:
    return [NodeShape("gpu-node", gpu_nodes, cpu="192", memory="1536Gi", gpus=8),
            NodeShape("cpu-node", cpu_nodes, cpu="32", memory="128Gi")]


def node_manifests(shapes: list[NodeShape]) -> list[dict]:
    manifests = []
    for shape in shapes:
        for i in range(shape.count):
            name = f"{shape.name_prefix}-{i}"
            labels = {"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                      "kubernetes.io/arch": "amd64", **shape.extra_labels}
            capacity = {"cpu": shape.cpu, "memory": shape.memory, "pods": str(shape.pods),
                        "ephemeral-storage": "3500Gi"}
            taints = []
            if shape.gpus:
                labels.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": shape.gpu_product,
                               "nvidia.com/gpu.count": str(shape.gpus),
                               "nvidia.com/gpu.memory": str(shape.gpu_memory_mib)})
                capacity[GPU_RESOURCE] = str(shape.gpus)
                taints.append({"key": GPU_RESOURCE, "effect": "NoSchedule"})
            manifests.append({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": labels,
                             "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
                "spec": {"taints": taints},
                "status": {"capacity": capacity, "allocatable": dict(capacity)},
            })
    return manifests
