"""A real, local Kubernetes control plane: etcd, kube-apiserver (TLS, RBAC, ServiceAccount tokens),
kube-controller-manager, kube-scheduler, KWOK fake GPU nodes, and draftgen's local kubelet.

    with LocalCluster() as cluster:          # or cluster.start() / cluster.stop()
        print(cluster.kubeconfig)

Every process is started in its own session and stopped by its own PID (SIGTERM, then SIGKILL);
ports are free loopback ports chosen at start (a port taken in between is retried with another);
state lives in a temp dir whose `logs/` are kept when asked (the pytest fixture keeps them when a
test failed). `state.json` in the state dir records the PIDs so a detached cluster (`make cluster`)
can be stopped later by another process (`make cluster-down`).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import binaries, pki
from .nodes import NodeShape, default_node_shapes, node_manifests

LOCAL_KUBELET_LABEL = "draftgen.io/local-kubelet"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# The end of each container log kept when a test failed: a server's start-up and its last words.
KEPT_CONTAINER_LOG_BYTES = 64 * 1024
# The local kubelet's log lines (kubelet/pod_runner.py) that say a container started, and exited.
STARTED = re.compile(r"pod (\S+): started (\S+) \(pid \d+, log (pods/\S+\.log)\)")
EXITED = re.compile(r"pod (\S+): (\S+) exited (-?\d+) \(log (pods/\S+\.log)\)")


class ClusterError(RuntimeError):
    pass


class ComponentDied(ClusterError):
    """A component of the control plane exited; the message carries the tail of its log."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


@dataclass
class Component:
    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] | None = None
    pid: int | None = None
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self._proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True, env={**os.environ, **(self.env or {})})
        self.pid = self._proc.pid

    def exit_code(self) -> int | None:
        """None while running. Works for processes started by another Python process too (by PID)."""
        if self._proc is not None:
            return self._proc.poll()
        if self.pid is None:
            return -1
        try:
            # A component that died is a zombie until the process that started it reaps it: dead too.
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            return -1
        return -1 if state in ("Z", "X") else None

    def stop(self, grace_s: float = 10.0) -> None:
        if self.pid is None or self.exit_code() is not None:
            return
        _signal_group(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self.exit_code() is None:
            time.sleep(0.05)
        if self.exit_code() is None:
            _signal_group(self.pid, signal.SIGKILL)
            if self._proc is not None:
                self._proc.wait(5)


def _signal_group(pid: int, sig: int) -> None:
    """Signal the component's own process group (its session), found from its own PID."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


class LocalCluster:
    def __init__(self, state_dir: Path | str | None = None, nodes: list[NodeShape] | None = None,
                 local_kubelet: bool = True, log=None):
        self.state_dir = Path(state_dir) if state_dir else Path(tempfile.mkdtemp(prefix="draftgen-cluster-"))
        self.node_shapes = nodes if nodes is not None else default_node_shapes()
        self.local_kubelet = local_kubelet
        self.components: list[Component] = []
        self.apiserver_port: int | None = None
        self._log = log or (lambda msg: print(f"[draftgen cluster] {msg}", file=sys.stderr, flush=True))

    # --- paths ------------------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def volumes_dir(self) -> Path:
        """Where the local kubelet maps pods' PVC volumes: one folder per PersistentVolumeClaim name."""
        return self.state_dir / "volumes"

    @property
    def images_file(self) -> Path:
        """The images loaded into the local kubelet (kubelet/loaded_images)."""
        return self.state_dir / "images.json"

    def load_image(self, ref: str, image: dict) -> None:
        """Make pods whose containers name `ref` run from this image's root, as `kind load` does:
        image is {"root", "env", "user", "workdir"} (draftgen_dev.image.rootfs.ImageRoot.as_json)."""
        loaded = json.loads(self.images_file.read_text()) if self.images_file.exists() else {}
        loaded[ref] = image
        temporary = self.images_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(loaded))
        temporary.replace(self.images_file)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    # --- lifecycle --------------------------------------------------------------------------------
    def __enter__(self) -> "LocalCluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout_s: float = 120.0) -> "LocalCluster":
        started = time.monotonic()
        bins = binaries.ensure_all()
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.volumes_dir.mkdir(parents=True, exist_ok=True)
        self.pki = pki.create(self.state_dir / "pki")
        try:
            etcd_port = self._start_with_port_retry("etcd", lambda: self._etcd(bins["etcd"]), self._etcd_ready)
            self._start_with_port_retry("kube-apiserver", lambda: self._apiserver(bins["kube-apiserver"], etcd_port),
                                        self._apiserver_ready)
            self._write_kubeconfig()
            self._start_with_port_retry("kube-controller-manager",
                                        lambda: self._controller_manager(bins["kube-controller-manager"]))
            self._start_with_port_retry("kube-scheduler", lambda: self._scheduler(bins["kube-scheduler"]))
            self._start_component(Component("kwok", self._kwok(bins["kwok"]), self.logs_dir / "kwok.log"))
            if self.local_kubelet:
                self._start_component(Component(
                    "local-kubelet",
                    [sys.executable, "-m", "draftgen_dev.cluster.kubelet", "--kubeconfig", str(self.kubeconfig),
                     "--volumes-dir", str(self.volumes_dir), "--state-dir", str(self.state_dir / "pods"),
                     "--images-file", str(self.images_file)],
                    self.logs_dir / "local-kubelet.log"))
            self._write_state()
            self._create_nodes()
            self._wait_until_usable(deadline=started + timeout_s)
        except BaseException:
            self.stop()
            raise
        self._log(f"control plane up in {time.monotonic() - started:.1f}s; KUBECONFIG={self.kubeconfig}")
        return self

    def stop(self) -> None:
        for component in reversed(self.components):
            component.stop()
        state = self.state_dir / "state.json"
        if state.exists():
            state.unlink()

    def check_alive(self) -> None:
        """Raise ComponentDied (with the component's log) if any component has exited."""
        for component in self.components:
            code = component.exit_code()
            if code is not None:
                raise ComponentDied(f"{component.name} exited with {code}; its log ends:\n{log_tail(component.log)}")

    def keep_logs(self, destination: Path) -> Path:
        """The components' logs, and the end of every container's log the local kubelet ran (the
        kubelet's own log says which pod and container each `pods/<uid>/<container>.log` is)."""
        destination.mkdir(parents=True, exist_ok=True)
        target = destination / self.state_dir.name
        shutil.copytree(self.logs_dir, target, dirs_exist_ok=True)
        for container_log in (self.state_dir / "pods").glob("*/*.log"):
            kept = target / "pods" / container_log.parent.name / container_log.name
            kept.parent.mkdir(parents=True, exist_ok=True)
            with open(container_log, "rb") as f:
                f.seek(max(0, container_log.stat().st_size - KEPT_CONTAINER_LOG_BYTES))
                kept.write_bytes(f.read())
        return target

    def failed_containers(self, most: int = 10, lines: int = 6) -> str:
        """The last lines of the latest containers the local kubelet saw fail (started more than
        once, or exited with an error of their own: 1-125, not a kill), for a failed session's
        output, where its kept files cannot be read."""
        kubelet_log = self.logs_dir / "local-kubelet.log"
        starts: Counter = Counter()
        failed: dict[tuple[str, str, str], str] = {}  # in the order of their last failure
        for line in kubelet_log.read_text().splitlines() if kubelet_log.exists() else []:
            if started := STARTED.search(line):
                key = started.groups()
                starts[key] += 1
                what = f"started {starts[key]} times" if starts[key] > 1 else None
            elif exited := EXITED.search(line):
                pod, container, code, path = exited.groups()
                key, what = (pod, container, path), f"exited {code}" if 1 <= int(code) <= 125 else None
            else:
                continue
            if what:
                failed.pop(key, None)
                failed[key] = what
        said = []
        for (pod, container, relative), what in list(failed.items())[-most:]:
            path = self.state_dir / relative
            tail = path.read_bytes()[-4096:].decode(errors="replace").splitlines()[-lines:] if path.exists() else []
            said.append(f"pod {pod}, container {container}, {what} ({relative}):\n"
                        + "\n".join(f"  | {t[:200]}" for t in tail))
        return "\n".join(said)

    # --- detached use (make cluster / make cluster-down) --------------------------------------------
    def _write_state(self) -> None:
        state = {"apiserver_port": self.apiserver_port, "kubeconfig": str(self.kubeconfig),
                 "components": [{"name": c.name, "pid": c.pid, "log": str(c.log)} for c in self.components]}
        (self.state_dir / "state.json").write_text(json.dumps(state, indent=2))

    @classmethod
    def attach(cls, state_dir: Path | str) -> "LocalCluster":
        state_dir = Path(state_dir)
        state = json.loads((state_dir / "state.json").read_text())
        cluster = cls(state_dir, local_kubelet=False)
        cluster.apiserver_port = state["apiserver_port"]
        cluster.pki = pki.files(state_dir / "pki")
        cluster.components = [Component(c["name"], [], Path(c["log"]), pid=c["pid"]) for c in state["components"]]
        return cluster

    # --- components ---------------------------------------------------------------------------------
    def _start_component(self, component: Component) -> None:
        component.start()
        self.components.append(component)

    def _start_with_port_retry(self, name: str, build, ready=None, attempts: int = 5):
        """Start a component on fresh free ports; if a port was taken in between, retry with others."""
        for attempt in range(attempts):
            argv, port = build()
            component = Component(name, argv, self.logs_dir / f"{name}.log")
            component.start()
            deadline = time.monotonic() + 60
            while True:
                code = component.exit_code()
                if code is not None:
                    text = log_tail(component.log, 200)
                    if "address already in use" in text and attempt + 1 < attempts:
                        self._log(f"{name}: port {port} taken, retrying with another")
                        break
                    raise ComponentDied(f"{name} exited with {code} during start; its log ends:\n{log_tail(component.log)}")
                if ready is None or ready(port):
                    self.components.append(component)
                    return port
                if time.monotonic() > deadline:
                    component.stop()
                    raise ClusterError(f"{name} did not become ready in 60s; its log ends:\n{log_tail(component.log)}")
                time.sleep(0.1)
        raise ClusterError(f"{name}: no free port after {attempts} attempts")

    def _etcd(self, binary: Path):
        client, peer = free_port(), free_port()
        argv = [str(binary), "--name", "draftgen", "--data-dir", str(self.state_dir / "etcd"),
                "--listen-client-urls", f"http://127.0.0.1:{client}",
                "--advertise-client-urls", f"http://127.0.0.1:{client}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"draftgen=http://127.0.0.1:{peer}",
                "--listen-metrics-urls", f"http://127.0.0.1:{free_port()}",
                # A throwaway test cluster: durability across power loss is not needed, speed is.
                "--unsafe-no-fsync", "--quota-backend-bytes", str(2 * 1024**3), "--log-level", "warn"]
        return argv, client

    @staticmethod
    def _etcd_ready(port: int) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                return json.loads(r.read()).get("health") == "true"
        except OSError:
            return False

    def _apiserver(self, binary: Path, etcd_port: int):
        port = free_port()
        self.apiserver_port = port
        p = self.pki
        argv = [str(binary), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
                f"--tls-cert-file={p.serving_cert}", f"--tls-private-key-file={p.serving_key}",
                f"--client-ca-file={p.ca_cert}", f"--cert-dir={self.state_dir / 'apiserver-certs'}",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={p.sa_pub}", f"--service-account-signing-key-file={p.sa_key}",
                "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=RBAC",
                "--allow-privileged=true", "--profiling=false", "--endpoint-reconciler-type=none",
                "--storage-media-type=application/vnd.kubernetes.protobuf"]
        return argv, port

    def _apiserver_ready(self, port: int) -> bool:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=ctx, timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def kubeconfig_inline(self) -> str:
        """The admin's kubeconfig with the certificates in it, for a process that cannot read this
        cluster's files (one run from an image as its user)."""
        config = yaml.safe_load(self.kubeconfig.read_text())
        for entry, keys in ((config["clusters"][0]["cluster"], ("certificate-authority",)),
                            (config["users"][0]["user"], ("client-certificate", "client-key"))):
            for key in keys:
                entry[f"{key}-data"] = base64.b64encode(Path(entry.pop(key)).read_bytes()).decode()
        return yaml.safe_dump(config)

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "draftgen-local",
            "clusters": [{"name": "draftgen-local", "cluster": {"server": self.server,
                                                                "certificate-authority": str(self.pki.ca_cert)}}],
            "users": [{"name": "admin", "user": {"client-certificate": str(self.pki.admin_cert),
                                                 "client-key": str(self.pki.admin_key)}}],
            "contexts": [{"name": "draftgen-local", "context": {"cluster": "draftgen-local", "user": "admin"}}],
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))
        self.kubeconfig.chmod(0o600)

    def _controller_manager(self, binary: Path):
        port = free_port()
        kc = str(self.kubeconfig)
        argv = [str(binary), f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}", "--leader-elect=false",
                "--bind-address=127.0.0.1", f"--secure-port={port}",
                f"--service-account-private-key-file={self.pki.sa_key}", f"--root-ca-file={self.pki.ca_cert}",
                f"--cluster-signing-cert-file={self.pki.ca_cert}", f"--cluster-signing-key-file={self.pki.ca_key}",
                "--use-service-account-credentials=false", "--controllers=*"]
        return argv, port

    def _scheduler(self, binary: Path):
        port = free_port()
        kc = str(self.kubeconfig)
        argv = [str(binary), f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}", "--leader-elect=false",
                "--bind-address=127.0.0.1", f"--secure-port={port}"]
        return argv, port

    def _kwok(self, binary: Path) -> list[str]:
        config = {
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
            "options": {
                "manageAllNodes": False,
                "manageNodesWithAnnotationSelector": "kwok.x-k8s.io/node=fake",
                # Pods carrying this label are run for real by the local kubelet; KWOK leaves them alone.
                "disregardStatusWithLabelSelector": f"{LOCAL_KUBELET_LABEL}=true",
                "cidr": "10.244.0.0/16",
                "nodeLeaseDurationSeconds": 40,
                # The binary does not default these when given a config file.
                "nodeLeaseParallelism": 4, "podPlayStageParallelism": 4, "nodePlayStageParallelism": 4,
                "podsOnNodeSyncParallelism": 1,
            },
        }
        stages = sorted((binary.parent / "stages").glob("*.yaml"))
        path = self.state_dir / "kwok.yaml"
        path.write_text("\n---\n".join([yaml.safe_dump(config), *(s.read_text() for s in stages)]))
        return [str(binary), f"--kubeconfig={self.kubeconfig}", f"--config={path}"]

    # --- objects ------------------------------------------------------------------------------------
    def api_client(self):
        from kubernetes import config
        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def create_local_volume(self, namespace: str, claim: str, size: str = "100Gi") -> Path:
        """A PersistentVolume on a folder of this machine and a claim bound to it (the PV controller binds
        them), so pods that mount the claim schedule as on a real cluster and the local kubelet maps it."""
        from kubernetes import client
        core = client.CoreV1Api(self.api_client())
        path = self.volumes_dir / f"{namespace}-{claim}"
        path.mkdir(parents=True, exist_ok=True)
        pv_name = f"local-{namespace}-{claim}"[:253]
        core.create_persistent_volume({
            "metadata": {"name": pv_name},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteMany"], "storageClassName": "local",
                     "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": str(path)},
                     "claimRef": {"namespace": namespace, "name": claim}}})
        core.create_namespaced_persistent_volume_claim(namespace, {
            "metadata": {"name": claim},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "local", "volumeName": pv_name,
                     "resources": {"requests": {"storage": size}}}})
        return path

    def _create_nodes(self) -> None:
        from kubernetes import client
        core = client.CoreV1Api(self.api_client())
        for manifest in node_manifests(self.node_shapes):
            core.create_node(manifest)

    def _wait_until_usable(self, deadline: float) -> None:
        """Usable = every node Ready (KWOK), the default ServiceAccount exists (controller-manager) and the
        root CA ConfigMap is published (ServiceAccount token volumes need it)."""
        from kubernetes import client
        api = self.api_client()
        core = client.CoreV1Api(api)
        want = {m["metadata"]["name"] for m in node_manifests(self.node_shapes)}
        while True:
            self.check_alive()
            ready = {n.metadata.name for n in core.list_node().items
                     if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))}
            sa = core.list_namespaced_service_account("default").items
            ca = core.list_namespaced_config_map("default", field_selector="metadata.name=kube-root-ca.crt").items
            if want <= ready and sa and ca:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"cluster not usable in time: nodes ready {sorted(ready)} of {sorted(want)}, "
                                   f"default ServiceAccount {'present' if sa else 'missing'}, "
                                   f"kube-root-ca.crt {'present' if ca else 'missing'}")
            time.sleep(0.2)
