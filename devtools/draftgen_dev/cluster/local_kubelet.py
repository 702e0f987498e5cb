"""The local kubelet: runs draftgen's own pods for real on this machine.

KWOK fakes every other pod on the fake nodes. A pod labelled `draftgen.io/local-kubelet=true`, once
the scheduler has bound it to a node, is run here instead, as a kubelet would run it:

- native sidecars (init containers with `restartPolicy: Always`) start first, each waited on through
  its startup probe; plain init containers run to completion; then the main containers run;
- each container is a local process (the image is ignored: its command runs from this Python
  environment) with the pod's env (values, downward API fields, ConfigMap/Secret keys, `$(VAR)`
  expansion), in a private mount namespace where the pod's volumes are bind-mounted at their
  mountPaths: PVCs map to `<volumes-dir>/<namespace>/<claim>`, emptyDirs and ConfigMaps/Secrets to
  per-pod folders, and a real ServiceAccount token (TokenRequest, bound to the pod) appears at
  `/var/run/secrets/kubernetes.io/serviceaccount` with KUBERNETES_SERVICE_HOST/PORT set, so
  in-cluster clients work unchanged;
- every pod gets its own loopback address as its pod IP (127.0.x.y), so two pods' servers can both
  listen on the same port, as in separate network namespaces, when they bind `$(POD_IP)`;
- the pod's status follows the processes: Running, then Succeeded or Failed with each container's
  exit code (so a Job's podFailurePolicy sees real exit codes);
- a pod marked for deletion gets SIGTERM, SIGKILL after its grace period, then is removed.

Liveness probes are not run (a dead local process already fails the pod).
"""

from __future__ import annotations

import argparse
import base64
import datetime
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import yaml
from kubernetes import client, config, watch

from .controlplane import LOCAL_KUBELET_LABEL

log = logging.getLogger("local-kubelet")
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def expand_vars(text: str, env: dict[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: known vars are replaced, unknown ones kept, `$$` escapes `$`."""
    def repl(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _VAR_REF.sub(repl, text)


def pod_ip_for(index: int) -> str:
    return f"127.0.{1 + index // 250}.{1 + index % 250}"


class PodRunner(threading.Thread):
    def __init__(self, kubelet: "LocalKubelet", pod: client.V1Pod, pod_ip: str):
        super().__init__(daemon=True, name=f"pod-{pod.metadata.name}")
        self.kubelet = kubelet
        self.pod = pod
        self.pod_ip = pod_ip
        self.core = kubelet.core
        self.dir = kubelet.state_dir / pod.metadata.uid
        self.procs: dict[str, subprocess.Popen] = {}
        self.terminating = threading.Event()
        self.statuses: dict[str, dict] = {}

    # --- status -----------------------------------------------------------------------------------
    def _patch_status(self, phase: str, ready: bool = False, message: str | None = None) -> None:
        spec = self.pod.spec
        sidecars = [c.name for c in (spec.init_containers or [])]
        status = {
            "phase": phase, "podIP": self.pod_ip, "podIPs": [{"ip": self.pod_ip}], "hostIP": "127.0.0.1",
            "startTime": self.started_at,
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": self.started_at},
                {"type": "ContainersReady", "status": str(ready), "lastTransitionTime": now()},
                {"type": "Ready", "status": str(ready), "lastTransitionTime": now()},
            ],
            "initContainerStatuses": [self.statuses[n] for n in sidecars if n in self.statuses],
            "containerStatuses": [self.statuses[c.name] for c in spec.containers if c.name in self.statuses],
        }
        if message:
            status["message"] = message
        try:
            self.core.patch_namespaced_pod_status(self.pod.metadata.name, self.pod.metadata.namespace,
                                                  {"status": status})
        except client.ApiException as e:
            if e.status != 404:
                log.warning("status of %s: %s", self.pod.metadata.name, e)

    def _container_status(self, container, state: dict, ready: bool = False) -> None:
        self.statuses[container.name] = {
            "name": container.name, "image": container.image or "local", "imageID": "", "ready": ready,
            "restartCount": 0, "started": "running" in state, "state": state}

    # --- environment and volumes --------------------------------------------------------------------
    def _field(self, path: str) -> str:
        meta = self.pod.metadata
        simple = {"metadata.name": meta.name, "metadata.namespace": meta.namespace, "metadata.uid": meta.uid,
                  "spec.nodeName": self.pod.spec.node_name, "spec.serviceAccountName": self.pod.spec.service_account_name,
                  "status.podIP": self.pod_ip, "status.hostIP": "127.0.0.1"}
        if path in simple:
            return simple[path] or ""
        m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
        if m:
            return (getattr(meta, m.group(1)) or {}).get(m.group(2), "")
        raise ValueError(f"unsupported fieldRef {path}")

    def _env(self, container) -> dict[str, str]:
        env = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
               "HOME": os.environ.get("HOME", "/root"), "HOSTNAME": self.pod.metadata.name,
               "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(self.kubelet.apiserver_port),
               "PYTHONUNBUFFERED": "1"}
        ns = self.pod.metadata.namespace
        for source in container.env_from or []:
            if source.config_map_ref:
                data = self.core.read_namespaced_config_map(source.config_map_ref.name, ns).data or {}
                env.update({(source.prefix or "") + k: v for k, v in data.items()})
        for var in container.env or []:
            if var.value_from is None:
                env[var.name] = expand_vars(var.value or "", env)
            elif var.value_from.field_ref:
                env[var.name] = self._field(var.value_from.field_ref.field_path)
            elif var.value_from.config_map_key_ref:
                ref = var.value_from.config_map_key_ref
                env[var.name] = (self.core.read_namespaced_config_map(ref.name, ns).data or {}).get(ref.key, "")
            elif var.value_from.secret_key_ref:
                ref = var.value_from.secret_key_ref
                data = self.core.read_namespaced_secret(ref.name, ns).data or {}
                env[var.name] = base64.b64decode(data.get(ref.key, "")).decode()
            elif var.value_from.resource_field_ref:
                res = var.value_from.resource_field_ref.resource  # e.g. limits.nvidia.com/gpu
                kind, _, name = res.partition(".")
                env[var.name] = str(((getattr(container.resources, kind, None) or {}) if container.resources else {}).get(name, ""))
        return env

    def _volume_sources(self) -> dict[str, Path]:
        """Each pod volume's local folder (created and filled as needed)."""
        ns = self.pod.metadata.namespace
        sources: dict[str, Path] = {}
        for vol in self.pod.spec.volumes or []:
            if vol.persistent_volume_claim:
                path = self._claim_path(vol.persistent_volume_claim.claim_name)
            elif vol.host_path:
                path = Path(vol.host_path.path)
            elif vol.config_map or vol.secret:
                path = self.dir / "volumes" / vol.name
                path.mkdir(parents=True, exist_ok=True)
                if vol.config_map:
                    data = self.core.read_namespaced_config_map(vol.config_map.name, ns).data or {}
                    files = {k: v.encode() for k, v in data.items()}
                else:
                    data = self.core.read_namespaced_secret(vol.secret.secret_name, ns).data or {}
                    files = {k: base64.b64decode(v) for k, v in data.items()}
                for key, content in files.items():
                    (path / key).write_bytes(content)
            elif vol.projected and vol.name.startswith("kube-api-access"):
                continue  # served by the ServiceAccount token mount below
            else:  # emptyDir (memory-backed or not) and anything else: a per-pod folder
                path = self.dir / "volumes" / vol.name
            path.mkdir(parents=True, exist_ok=True)
            sources[vol.name] = path
        return sources

    def _claim_path(self, claim: str) -> Path:
        """A bound claim's PersistentVolume path (hostPath or local); else a folder named after the claim."""
        ns = self.pod.metadata.namespace
        pvc = self.core.read_namespaced_persistent_volume_claim(claim, ns)
        if pvc.spec.volume_name:
            pv = self.core.read_persistent_volume(pvc.spec.volume_name).spec
            source = pv.host_path or pv.local
            if source is not None:
                return Path(source.path)
        return self.kubelet.volumes_dir / ns / claim

    def _service_account_dir(self) -> Path | None:
        spec = self.pod.spec
        if spec.automount_service_account_token is False:
            return None
        meta = self.pod.metadata
        request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(
            audiences=[], expiration_seconds=6 * 3600,
            bound_object_ref=client.V1BoundObjectReference(kind="Pod", api_version="v1", name=meta.name, uid=meta.uid)))
        token = self.core.create_namespaced_service_account_token(
            spec.service_account_name or "default", meta.namespace, request).status.token
        ca = self.core.read_namespaced_config_map("kube-root-ca.crt", meta.namespace).data["ca.crt"]
        path = self.dir / "serviceaccount"
        path.mkdir(parents=True, exist_ok=True)
        (path / "token").write_text(token)
        (path / "ca.crt").write_text(ca)
        (path / "namespace").write_text(meta.namespace)
        return path

    def _argv(self, container, env: dict[str, str], volumes: dict[str, Path], sa_dir: Path | None) -> list[str]:
        if not container.command:
            raise ValueError(f"container {container.name} has no command (the local kubelet has no image entrypoints)")
        binds = []
        for mount in container.volume_mounts or []:
            if mount.mount_path.startswith(("/dev", "/proc", "/sys")) or mount.name not in volumes:
                continue
            src = volumes[mount.name] / (mount.sub_path or "")
            src.mkdir(parents=True, exist_ok=True)
            binds += ["--bind", f"{src}:{mount.mount_path}" + (":ro" if mount.read_only else "")]
        if sa_dir is not None:
            binds += ["--bind", f"{sa_dir}:{SA_MOUNT}:ro"]
        cmd = [expand_vars(a, env) for a in [*container.command, *(container.args or [])]]
        return ["unshare", "--mount", "--propagation", "private", sys.executable, "-m",
                "draftgen_dev.cluster.pod_exec", *binds, "--", *cmd]

    # --- running ----------------------------------------------------------------------------------
    def _start(self, container, volumes, sa_dir) -> subprocess.Popen:
        env = self._env(container)
        argv = self._argv(container, env, volumes, sa_dir)
        logfile = open(self.dir / f"{container.name}.log", "ab")
        proc = subprocess.Popen(argv, env=env, stdout=logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=container.working_dir or str(self.dir), start_new_session=True)
        logfile.close()
        self.procs[container.name] = proc
        self._container_status(container, {"running": {"startedAt": now()}})
        log.info("pod %s/%s: started %s (pid %d)", self.pod.metadata.namespace, self.pod.metadata.name,
                 container.name, proc.pid)
        return proc

    def _probe_ok(self, container, probe) -> bool:
        if probe.http_get:
            port = probe.http_get.port
            if isinstance(port, str) and not port.isdigit():
                port = next(p.container_port for p in container.ports or [] if p.name == port)
            host = probe.http_get.host or self.pod_ip
            try:
                with urllib.request.urlopen(f"http://{host}:{port}{probe.http_get.path or '/'}", timeout=2) as r:
                    return 200 <= r.status < 400
            except OSError:
                return False
        if probe._exec:
            return subprocess.run(probe._exec.command, capture_output=True).returncode == 0
        return True

    def _wait_started(self, container, proc) -> bool:
        probe = container.startup_probe or container.readiness_probe
        if probe is None:
            return True
        deadline = time.monotonic() + (probe.initial_delay_seconds or 0) + \
            (probe.period_seconds or 10) * (probe.failure_threshold or 3)
        while time.monotonic() < deadline and not self.terminating.is_set():
            if proc.poll() is not None:
                return False
            if self._probe_ok(container, probe):
                return True
            time.sleep(min(0.2, probe.period_seconds or 1))
        return False

    def _finish(self, container, code: int) -> None:
        self._container_status(container, {"terminated": {
            "exitCode": code, "reason": "Completed" if code == 0 else "Error",
            "startedAt": self.statuses[container.name]["state"].get("running", {}).get("startedAt", now()),
            "finishedAt": now()}})

    def run(self) -> None:
        self.started_at = now()
        try:
            self._run()
        except Exception as e:  # a bug here must fail the pod, not hang it
            log.exception("pod %s failed", self.pod.metadata.name)
            self._stop_all(0)
            self._patch_status("Failed", message=f"local kubelet: {e}")

    def _run(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        volumes = self._volume_sources()
        sa_dir = self._service_account_dir()
        spec = self.pod.spec
        sidecars = []
        self._patch_status("Pending")
        for container in spec.init_containers or []:
            proc = self._start(container, volumes, sa_dir)
            if container.restart_policy == "Always":
                sidecars.append((container, proc))
                if not self._wait_started(container, proc):
                    code = proc.poll()
                    self._stop_all(0)
                    self._finish(container, code if code is not None else 137)
                    self._patch_status("Failed", message=f"sidecar {container.name} did not start")
                    return
                self.statuses[container.name]["ready"] = True
                self._patch_status("Pending")
            else:
                code = proc.wait()
                self._finish(container, code)
                if code != 0:
                    self._stop_all(0)
                    self._patch_status("Failed", message=f"init container {container.name} exited {code}")
                    return
        mains = [(c, self._start(c, volumes, sa_dir)) for c in spec.containers]
        for c, _ in mains:
            self.statuses[c.name]["ready"] = True
        self._patch_status("Running", ready=True)
        codes = {}
        for container, proc in mains:
            codes[container.name] = proc.wait()
            self._finish(container, codes[container.name])
        for container, proc in sidecars:  # sidecars stop after the main containers, as in Kubernetes
            self._terminate(proc, 10)
            self._finish(container, proc.returncode if proc.returncode is not None else 137)
        if self.terminating.is_set():
            return  # the pod is being deleted; its status no longer matters
        failed = {n: c for n, c in codes.items() if c != 0}
        self._patch_status("Failed" if failed else "Succeeded",
                           message=f"containers exited {failed}" if failed else None)

    @staticmethod
    def _terminate(proc: subprocess.Popen, grace_s: float) -> None:
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:
            pass

    def _stop_all(self, grace_s: float) -> None:
        """Main containers first, sidecars after them (as Kubernetes stops native sidecars), all
        within the grace period; then SIGKILL."""
        deadline = time.monotonic() + grace_s
        sidecars = {c.name for c in self.pod.spec.init_containers or [] if c.restart_policy == "Always"}
        for group in ([p for n, p in self.procs.items() if n not in sidecars],
                      [p for n, p in self.procs.items() if n in sidecars]):
            for proc in group:
                if proc.poll() is None:
                    try:
                        os.killpg(proc.pid, signal.SIGTERM if grace_s else signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            for proc in group:
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()

    def terminate(self, grace_s: float) -> None:
        self.terminating.set()
        self._stop_all(grace_s)


class LocalKubelet:
    def __init__(self, kubeconfig: str, volumes_dir: Path, state_dir: Path):
        self.api = config.new_client_from_config(config_file=kubeconfig)
        self.core = client.CoreV1Api(self.api)
        server = yaml.safe_load(Path(kubeconfig).read_text())["clusters"][0]["cluster"]["server"]
        self.apiserver_port = int(server.rsplit(":", 1)[1])
        self.volumes_dir = volumes_dir
        self.state_dir = state_dir
        self.runners: dict[str, PodRunner] = {}
        self.next_ip = 0
        self.lock = threading.Lock()

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
                runner = PodRunner(self, pod, pod_ip_for(self.next_ip))
                self.next_ip += 1
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
        shutil.rmtree(self.state_dir / pod.metadata.uid / "volumes", ignore_errors=True)

    def run(self) -> None:
        selector = f"{LOCAL_KUBELET_LABEL}=true"
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--volumes-dir", type=Path, required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args.state_dir.mkdir(parents=True, exist_ok=True)
    kubelet = LocalKubelet(args.kubeconfig, args.volumes_dir, args.state_dir)

    def on_term(*_):
        kubelet.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    kubelet.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
