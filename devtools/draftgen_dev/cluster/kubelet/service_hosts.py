"""Service names for the local kubelet's pods. This control plane has no cluster DNS and no
kube-proxy, so each container gets an /etc/hosts (bind-mounted in its private mount namespace) that
names every Service by the pod IP of one Ready pod its selector matches: `svc`, `svc.ns` and
`svc.ns.svc[.cluster.local]`. A client reaches a Service's port only where it equals the target
port, which is how draftgen's own Services are written.

It also names each pod that sets `hostname` and `subdomain` where a headless Service of that name
selects it, as cluster DNS does (Kubernetes' DNS for Services and Pods: `hostname.subdomain.ns.svc`,
an A record per pod; a not-ready pod only when the Service publishes not-ready addresses): how the
ranks of a multi-node replica find their leader (an Indexed Job's pods get `<job>-<index>` as their
hostname)."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from kubernetes import client, watch

log = logging.getLogger("local-kubelet")


def service_addresses(api: client.ApiClient) -> dict[tuple[str, str], str]:
    """(namespace, name) -> pod IP: every Service by the first Ready pod its selector matches, and every
    pod named under a headless Service (pod_names). Chosen here, not read from EndpointSlices: the
    endpoints controllers leave out the loopback pod IPs of this kubelet."""
    core = client.CoreV1Api(api)
    # As the EndpointSlice controller counts pods: any with an IP that has not ended (a pod whose init
    # containers still run is Pending, with its IP: a rank group's leader while its server loads).
    live = [p for p in core.list_pod_for_all_namespaces().items
            if p.status.pod_ip and p.status.phase in ("Pending", "Running") and p.metadata.deletion_timestamp is None]
    ready = [p for p in live if is_ready(p)]
    services = core.list_service_for_all_namespaces().items
    addresses = {}
    for service in services:
        chosen = sorted(p.status.pod_ip for p in ready if selects(service, p))
        if chosen:
            addresses[(service.metadata.namespace, service.metadata.name)] = chosen[0]
    return {**addresses, **pod_names(live, services)}


def is_ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def selects(service, pod) -> bool:
    selector = service.spec.selector or {}
    return (pod.metadata.namespace == service.metadata.namespace and bool(selector)
            and selector.items() <= (pod.metadata.labels or {}).items())


def pod_names(pods: list, services: list) -> dict[tuple[str, str], str]:
    """(namespace, `hostname.subdomain`) -> pod IP for each pod whose subdomain is a headless Service that
    selects it (a not-ready pod only where the Service sets publishNotReadyAddresses)."""
    headless = {(s.metadata.namespace, s.metadata.name): s for s in services if s.spec.cluster_ip == "None"}
    names = {}
    for pod in pods:
        service = headless.get((pod.metadata.namespace, pod.spec.subdomain))
        if (pod.spec.hostname and service is not None and selects(service, pod)
                and (is_ready(pod) or service.spec.publish_not_ready_addresses)):
            names[(pod.metadata.namespace, f"{pod.spec.hostname}.{pod.spec.subdomain}")] = pod.status.pod_ip
    return names


def hosts_text(namespace: str, addresses: dict[tuple[str, str], str]) -> str:
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost"]
    for (ns, name), ip in sorted(addresses.items()):
        names = [f"{name}.{ns}.svc.cluster.local", f"{name}.{ns}.svc", f"{name}.{ns}"]
        lines.append("\t".join([ip, *names, *([name] if ns == namespace else [])]))
    return "\n".join(lines) + "\n"


class ServiceHosts:
    """Every container's hosts file, rewritten in place when the Services' endpoints change (a bind
    mount follows the file's inode), so a name resolves once its Service has a ready endpoint, as
    cluster DNS would answer. Pods and Services are watched: the files are read again after a change,
    at most once an `interval_s`, and never while nothing changes or no container runs."""

    def __init__(self, api: client.ApiClient, interval_s: float = 1.0):
        self.api, self.interval_s = api, interval_s
        self.files: dict[Path, str] = {}  # hosts file -> its pod's namespace
        self.lock = threading.Lock()
        self.changed = threading.Event()

    def file_for(self, namespace: str, path: Path) -> Path:
        path.write_text(hosts_text(namespace, service_addresses(self.api)))
        with self.lock:
            self.files[path] = namespace
        return path

    def forget(self, folder: Path) -> None:
        with self.lock:
            for path in [p for p in self.files if folder in p.parents]:
                del self.files[path]

    def start(self) -> None:
        core = client.CoreV1Api(self.api)
        for listed in (core.list_pod_for_all_namespaces, core.list_service_for_all_namespaces):
            threading.Thread(target=self.watch_forever, args=(listed,), daemon=True,
                             name=f"service-hosts-{listed.__name__}").start()
        threading.Thread(target=self.refresh_forever, daemon=True, name="service-hosts").start()

    def watch_forever(self, listed) -> None:
        """Say `changed` at every change of what `listed` lists (and when its watch starts again)."""
        while True:
            try:
                for _ in watch.Watch().stream(listed, timeout_seconds=300):
                    self.changed.set()
            except Exception as e:  # the API server restarting: watch again
                log.warning("%s watch restarted: %s", listed.__name__, e)
                time.sleep(0.5)
            self.changed.set()

    def refresh_forever(self) -> None:
        while True:
            self.changed.wait()
            self.changed.clear()
            with self.lock:
                files = list(self.files.items())
            if files:
                self.refresh(files)
            time.sleep(self.interval_s)

    def refresh(self, files: list[tuple[Path, str]]) -> None:
        try:
            addresses = service_addresses(self.api)
        except Exception as e:  # the API server restarting: read again at the next change
            log.warning("Services not read: %s", e)
            self.changed.set()
            return
        for path, namespace in files:
            text = hosts_text(namespace, addresses)
            try:
                if path.read_text() != text:
                    with open(path, "w") as f:  # truncated in place: same inode
                        f.write(text)
            except FileNotFoundError:
                self.forget(path.parent)
