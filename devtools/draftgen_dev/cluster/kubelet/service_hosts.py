"""Service names for the local kubelet's pods. This control plane has no cluster DNS and no
kube-proxy, so each container gets an /etc/hosts (bind-mounted in its private mount namespace) that
names every Service by the pod IP of one Ready pod its selector matches: `svc`, `svc.ns` and
`svc.ns.svc[.cluster.local]`. A client reaches a Service's port only where it equals the target
port, which is how draftgen's own Services are written."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from kubernetes import client

log = logging.getLogger("local-kubelet")


def service_addresses(api: client.ApiClient) -> dict[tuple[str, str], str]:
    """(namespace, Service) -> the pod IP of the first Ready pod its selector matches. Chosen here, not
    read from EndpointSlices: the endpoints controllers leave out the loopback pod IPs of this kubelet."""
    core = client.CoreV1Api(api)
    ready = [p for p in core.list_pod_for_all_namespaces(field_selector="status.phase=Running").items
             if p.status.pod_ip and p.metadata.deletion_timestamp is None
             and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
    addresses = {}
    for service in core.list_service_for_all_namespaces().items:
        selector = service.spec.selector or {}
        chosen = sorted(p.status.pod_ip for p in ready if p.metadata.namespace == service.metadata.namespace
                        and selector and selector.items() <= (p.metadata.labels or {}).items())
        if chosen:
            addresses[(service.metadata.namespace, service.metadata.name)] = chosen[0]
    return addresses


def hosts_text(namespace: str, addresses: dict[tuple[str, str], str]) -> str:
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost"]
    for (ns, service), ip in sorted(addresses.items()):
        names = [f"{service}.{ns}.svc.cluster.local", f"{service}.{ns}.svc", f"{service}.{ns}"]
        lines.append("\t".join([ip, *names, *([service] if ns == namespace else [])]))
    return "\n".join(lines) + "\n"


class ServiceHosts:
    """Every container's hosts file, rewritten in place when the Services' endpoints change (a bind
    mount follows the file's inode), so a name resolves once its Service has a ready endpoint, as
    cluster DNS would answer."""

    def __init__(self, api: client.ApiClient, interval_s: float = 1.0):
        self.api, self.interval_s = api, interval_s
        self.files: dict[Path, str] = {}  # hosts file -> its pod's namespace
        self.lock = threading.Lock()

    def file_for(self, namespace: str, path: Path) -> Path:
        path.write_text(hosts_text(namespace, service_addresses(self.api)))
        with self.lock:
            self.files[path] = namespace
        return path

    def forget(self, folder: Path) -> None:
        with self.lock:
            for path in [p for p in self.files if folder in p.parents]:
                del self.files[path]

    def refresh_forever(self) -> None:
        while True:
            time.sleep(self.interval_s)
            try:
                addresses = service_addresses(self.api)
            except Exception as e:  # the API server restarting: try again
                log.warning("Services not read: %s", e)
                continue
            with self.lock:
                files = list(self.files.items())
            for path, namespace in files:
                text = hosts_text(namespace, addresses)
                try:
                    if path.read_text() != text:
                        with open(path, "w") as f:  # truncated in place: same inode
                            f.write(text)
                except FileNotFoundError:
                    self.forget(path.parent)
