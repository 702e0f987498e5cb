"""Kueue (sigs.k8s.io/kueue, pinned in versions.py) running against the local control plane, as its
own process on this machine, for the tests that queue draftgen's Jobs.

Outside a cluster Kueue needs what its Deployment would give it (kueue config/components, v0.19.2):
- its CRDs, established before it starts;
- its webhooks served on 127.0.0.1 with a cert of the local CA and the webhook configurations
  pointed at that address (internal cert management off, so it does not try to write a Secret);
- leader election off; the visibility API off (`VisibilityOnDemand=false`: it needs an API service);
- a metrics cert at the fixed path /etc/kueue/metrics/certs (cmd/kueue/main.go): bind-mounted there
  in a private mount namespace of the Kueue process alone (as the local kubelet mounts volumes).
Only the `batch/job` integration is on, and only the webhooks for Jobs and Kueue's own kinds are
registered: a webhook for a kind whose integration is off would refuse every object of that kind.

The Job webhook has failurePolicy Fail, so `stop` removes the webhook configurations before it stops
the process; otherwise no Job could be created in the cluster afterwards.

    with LocalKueue(cluster) as kueue:
        kueue.create_queues(namespace, gpus=8)
"""

from __future__ import annotations

import base64
import sys
import time
import urllib.request
from pathlib import Path

import yaml
from kubernetes import client

from . import binaries, pki
from .controlplane import ClusterError, Component, free_port, log_tail
from .waiting import crd_established, wait_until

METRICS_CERT_DIR = "/etc/kueue/metrics/certs"
WEBHOOK_GROUPS = {"batch", "kueue.x-k8s.io"}
API = ("kueue.x-k8s.io", "v1beta2")
FLAVOR, CLUSTER_QUEUE = "gpu-nodes", "gpus"


def webhook_configurations(manifests: str, port: int, ca_bundle: str) -> list[dict]:
    """Kueue's webhook configurations for Jobs and its own kinds, each pointed at 127.0.0.1:port."""
    out = []
    for doc in yaml.safe_load_all(manifests):
        if not doc:
            continue
        hooks = [h for h in doc["webhooks"] if {g for r in h["rules"] for g in r["apiGroups"]} <= WEBHOOK_GROUPS]
        for hook in hooks:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
        out.append({"apiVersion": doc["apiVersion"], "kind": doc["kind"],
                    "metadata": {"name": f"kueue-{doc['metadata']['name']}"}, "webhooks": hooks})
    return out


class LocalKueue:
    def __init__(self, cluster):
        self.cluster = cluster
        self.dir = cluster.state_dir / "kueue"
        self.api = cluster.api_client()
        self.webhooks: list[dict] = []
        self.component: Component | None = None

    # --- start and stop -----------------------------------------------------------------------------
    def start(self, timeout_s: float = 120.0) -> "LocalKueue":
        part = binaries.ensure(binaries.KUEUE)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._install_crds(part / "crds", timeout_s)
        certs = self.dir / "certs"
        cert, key = pki.issue_serving_cert(self.cluster.pki, certs, "kueue")
        for name, src in (("tls.crt", cert), ("tls.key", key)):
            (certs / name).write_bytes(src.read_bytes())
        webhook_port, self.health_port, metrics_port = free_port(), free_port(), free_port()
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
            "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(certs)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "integrations": {"frameworks": ["batch/job"]},
        }
        (self.dir / "config.yaml").write_text(yaml.safe_dump(config))
        ca = base64.b64encode(self.cluster.pki.ca_cert.read_bytes()).decode()
        self.webhooks = webhook_configurations((part / "webhooks.yaml").read_text(), webhook_port, ca)
        argv = ["unshare", "--mount", "--propagation", "private", sys.executable, "-m", "draftgen_dev.cluster.pod_exec",
                "--bind", f"{certs}:{METRICS_CERT_DIR}:ro", "--",
                str(part / "kueue"), f"--config={self.dir / 'config.yaml'}", "--feature-gates=VisibilityOnDemand=false"]
        self.component = Component("kueue", argv, self.cluster.logs_dir / "kueue.log",
                                   env={"KUBECONFIG": str(self.cluster.kubeconfig)})
        self.component.start()
        try:
            self._register_webhooks()
            self._wait_ready(time.monotonic() + timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        admission = client.AdmissionregistrationV1Api(self.api)
        for config in self.webhooks:
            delete = (admission.delete_mutating_webhook_configuration if config["kind"].startswith("Mutating")
                      else admission.delete_validating_webhook_configuration)
            try:
                delete(config["metadata"]["name"])
            except client.ApiException as e:
                if e.status != 404:
                    raise
        if self.component is not None:
            self.component.stop()
        self.api.close()

    def __enter__(self) -> "LocalKueue":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def check_alive(self) -> None:
        code = self.component.exit_code() if self.component else -1
        if code is not None:
            raise ClusterError(f"kueue exited with {code}; its log ends:\n{log_tail(self.component.log)}")

    def _install_crds(self, folder: Path, timeout_s: float) -> None:
        ext = client.ApiextensionsV1Api(self.api)
        names = []
        for path in sorted(folder.glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            names.append(crd["metadata"]["name"])
            try:
                ext.create_custom_resource_definition(crd)
            except client.ApiException as e:
                if e.status != 409:
                    raise
        deadline = time.monotonic() + timeout_s
        for name in names:
            try:
                wait_until(lambda: crd_established(self.api, name), deadline - time.monotonic(),
                           f"Kueue's CRD {name} to be established")
            except TimeoutError as e:
                raise ClusterError(str(e)) from None

    def _register_webhooks(self) -> None:
        admission = client.AdmissionregistrationV1Api(self.api)
        for config in self.webhooks:
            create = (admission.create_mutating_webhook_configuration if config["kind"].startswith("Mutating")
                      else admission.create_validating_webhook_configuration)
            create(config)

    def _wait_ready(self, deadline: float) -> None:
        """Ready = its readiness probe answers and its webhooks admit a ResourceFlavor (so they serve)."""
        while True:
            self.check_alive()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                    if r.status == 200:
                        self._create(None, "resourceflavors", {"metadata": {"name": FLAVOR}})
                        return
            except (OSError, client.ApiException):
                pass
            if time.monotonic() > deadline:
                raise ClusterError(f"kueue not ready in time; its log ends:\n{log_tail(self.component.log)}")
            time.sleep(0.5)

    # --- queues ---------------------------------------------------------------------------------------
    def _create(self, namespace: str | None, plural: str, body: dict) -> None:
        custom = client.CustomObjectsApi(self.api)
        body = {"apiVersion": "/".join(API), "kind": _KINDS[plural], **body}
        try:
            if namespace is None:
                custom.create_cluster_custom_object(*API, plural, body)
            else:
                custom.create_namespaced_custom_object(*API, namespace, plural, body)
        except client.ApiException as e:
            if e.status != 409:
                raise

    def create_cluster_queue(self, name: str = CLUSTER_QUEUE, gpus: int = 8, preemption: bool = True) -> None:
        """A ClusterQueue with `gpus` of nvidia.com/gpu (CPU and memory plentiful) on the one flavor;
        a higher-priority workload preempts lower ones within it when `preemption`."""
        quota = [{"name": "cpu", "nominalQuota": "1000"}, {"name": "memory", "nominalQuota": "10Ti"},
                 {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)}]
        spec = {"namespaceSelector": {},
                "resourceGroups": [{"coveredResources": [q["name"] for q in quota],
                                    "flavors": [{"name": FLAVOR, "resources": quota}]}]}
        if preemption:
            spec["preemption"] = {"withinClusterQueue": "LowerPriority"}
        self._create(None, "clusterqueues", {"metadata": {"name": name}, "spec": spec})

    def set_gpu_quota(self, gpus: int, name: str = CLUSTER_QUEUE) -> None:
        """The ClusterQueue's nvidia.com/gpu quota, changed (as an administrator adds nodes to it)."""
        custom = client.CustomObjectsApi(self.api)
        queue = custom.get_cluster_custom_object(*API, "clusterqueues", name)
        for quota in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
            if quota["name"] == "nvidia.com/gpu":
                quota["nominalQuota"] = str(gpus)
        custom.replace_cluster_custom_object(*API, "clusterqueues", name, queue)

    def create_local_queue(self, namespace: str, name: str, cluster_queue: str = CLUSTER_QUEUE) -> None:
        self._create(namespace, "localqueues", {"metadata": {"name": name}, "spec": {"clusterQueue": cluster_queue}})

    def create_priority_class(self, name: str, value: int) -> None:
        self._create(None, "workloadpriorityclasses", {"metadata": {"name": name}, "value": value})


_KINDS = {"resourceflavors": "ResourceFlavor", "clusterqueues": "ClusterQueue", "localqueues": "LocalQueue",
          "workloadpriorityclasses": "WorkloadPriorityClass"}
