"""The local kubelet's watch: draftgen's pods, once bound to a node, run here (see the package)."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import socket
import threading
import time
from pathlib import Path

import yaml
from kubernetes import client, config, watch

from draftgen_dev.cluster.controlplane import LOCAL_KUBELET_LABEL

from .pod_runner import PodRunner
from .service_hosts import ServiceHosts

log = logging.getLogger("local-kubelet")


def pod_ip_for(index: int) -> str:
    """Every pod its own loopback address, so two pods' servers can listen on one port."""
    return f"127.0.{1 + index // 250}.{1 + index % 250}"


def declared_ports(pod: client.V1Pod) -> list[int]:
    containers = [*(pod.spec.init_containers or []), *pod.spec.containers]
    return sorted({p.container_port for c in containers for p in c.ports or []})


def taken_ports(ip: str, ports: list[int]) -> list[int]:
    """The ports someone already listens on at `ip` (directly or on all addresses)."""
    taken = []
    for port in ports:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed connection's TIME_WAIT is no owner
            try:
                s.bind((ip, port))
            except OSError:
                taken.append(port)
    return taken


def free_pod_ip(index: int, ports: list[int]) -> tuple[str, int]:
    """From the index-th pod address on, the first on which none of `ports` is taken, and the index
    after it. A process this kubelet does not know (another cluster's pod, a server on all
    addresses) would otherwise answer a pod's probes in place of its own server, which then fails
    to bind."""
    while True:
        ip, index = pod_ip_for(index), index + 1
        taken = taken_ports(ip, ports)
        if not taken:
            return ip, index
        log.warning("address %s skipped: ports %s already taken there", ip, taken)


class LocalKubelet:
    def __init__(self, kubeconfig: str, volumes_dir: Path, state_dir: Path, images_file: Path | None = None):
        self.api = config.new_client_from_config(config_file=kubeconfig)
        self.core = client.CoreV1Api(self.api)
        server = yaml.safe_load(Path(kubeconfig).read_text())["clusters"][0]["cluster"]["server"]
        self.apiserver_port = int(server.rsplit(":", 1)[1])
        self.volumes_dir = volumes_dir
        self.state_dir = state_dir
        self.images_file = images_file  # loaded_images
        self.runners: dict[str, PodRunner] = {}
        self.next_ip = 0
        self.lock = threading.Lock()
        self.hosts = ServiceHosts(self.api)

    def shutdown(self) -> None:
        """Stop every pod's processes: they run in their own sessions and would outlive us."""
        with self.lock:
            runners = list(self.runners.values())
        for runner in runners:
            runner.terminate(0)

    def handle(self, pod: client.V1Pod) -> None:
        # A finished pod keeps its runner entry until it is deleted, so it is never started twice.
        uid = pod.metadata.uid
        with self.lock:
            runner = self.runners.get(uid)
            if pod.metadata.deletion_timestamp is not None:
                grace = pod.metadata.deletion_grace_period_seconds or 0
                threading.Thread(target=self._delete, args=(pod, runner, grace), daemon=True).start()
                return
            if runner is None and pod.spec.node_name and (pod.status.phase in (None, "Pending")):
                ip, self.next_ip = free_pod_ip(self.next_ip, declared_ports(pod))
                runner = PodRunner(self, pod, ip)
                self.runners[uid] = runner
                runner.start()

    def _delete(self, pod: client.V1Pod, runner: PodRunner | None, grace: int) -> None:
        if runner is not None:
            runner.terminate(grace)
        try:
            # Grace 0 goes in the body: the generated client drops a falsy grace_period_seconds query parameter.
            self.core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace, body=client.V1DeleteOptions(
                grace_period_seconds=0, preconditions=client.V1Preconditions(uid=pod.metadata.uid)))
        except client.ApiException as e:
            if e.status not in (404, 409):
                log.warning("delete %s: %s", pod.metadata.name, e)
        with self.lock:
            self.runners.pop(pod.metadata.uid, None)
        self.hosts.forget(self.state_dir / pod.metadata.uid)
        shutil.rmtree(self.state_dir / pod.metadata.uid / "volumes", ignore_errors=True)

    def run(self) -> None:
        selector = f"{LOCAL_KUBELET_LABEL}=true"
        self.hosts.start()
        while True:
            try:
                pods = self.core.list_pod_for_all_namespaces(label_selector=selector)
                for pod in pods.items:
                    self.handle(pod)
                for event in watch.Watch().stream(self.core.list_pod_for_all_namespaces, label_selector=selector,
                                                  resource_version=pods.metadata.resource_version, timeout_seconds=300):
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.handle(event["object"])
            except Exception as e:  # a broken watch is restarted, as kubelets do
                log.warning("watch restarted: %s", e)
                time.sleep(0.5)


def main() -> int:
    parser = argparse.ArgumentParser(description="the local kubelet: runs draftgen's pods on this machine")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--volumes-dir", type=Path, required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--images-file", type=Path, help="the images loaded into this node (loaded_images)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args.state_dir.mkdir(parents=True, exist_ok=True)
    kubelet = LocalKubelet(args.kubeconfig, args.volumes_dir, args.state_dir, args.images_file)

    def on_term(*_):
        kubelet.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    kubelet.run()
    return 0
