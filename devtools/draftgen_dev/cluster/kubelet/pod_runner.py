"""One pod of the local kubelet: its containers started in order as local processes, its status
following them, its termination (main containers first, then the native sidecars)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from kubernetes import client

from draftgen_contracts.timestamps import utc_now_iso as now

from .image_pull import back_off_message, pull_error
from .loaded_images import loaded_image, run_options
from .pod_env import container_env
from .pod_volumes import container_argv, service_account_dir, volume_sources
from .probes import wait_started

log = logging.getLogger("local-kubelet")

# A kubelet's back-off before restarting a crashed container or pulling an image again: 10 s,
# doubling up to 5 minutes (kubernetes pkg/kubelet/kubelet.go, MaxContainerBackOff, v1.36).
BACK_OFF_FIRST_S = 10.0
BACK_OFF_MAX_S = 300.0


def back_off_s(failures: int) -> float:
    return min(BACK_OFF_MAX_S, BACK_OFF_FIRST_S * 2 ** max(0, failures - 1))


def restarts(restart_policy: str | None, exit_code: int) -> bool:
    """Whether a main container that exited is started again in place, as the pod's restartPolicy
    says (Always by default, as the API server defaults it). A Deployment's pod is never failed for
    a crash: failing it would make its ReplicaSet create a new pod for every crash."""
    policy = restart_policy or "Always"
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


class PodRunner(threading.Thread):
    def __init__(self, kubelet, pod: client.V1Pod, pod_ip: str):  # kubelet: the LocalKubelet that owns it
        super().__init__(daemon=True, name=f"pod-{pod.metadata.name}")
        self.kubelet = kubelet
        self.pod = pod
        self.pod_ip = pod_ip
        self.core = kubelet.core
        self.dir = kubelet.state_dir / pod.metadata.uid
        self.procs: dict[str, subprocess.Popen] = {}
        self.terminating = threading.Event()
        self.statuses: dict[str, dict] = {}
        # Main containers run in threads of their own; one status is built and sent at a time.
        self.status_lock = threading.Lock()

    # --- status -----------------------------------------------------------------------------------
    def _patch_status(self, phase: str, ready: bool = False, message: str | None = None) -> None:
        with self.status_lock:
            self._send_status(phase, ready, message)

    def _send_status(self, phase: str, ready: bool, message: str | None) -> None:
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
        old = self.statuses.get(container.name) or {}
        self.statuses[container.name] = {
            "name": container.name, "image": container.image or "local", "imageID": "", "ready": ready,
            "restartCount": old.get("restartCount", 0), "started": "running" in state, "state": state,
            **({"lastState": old["lastState"]} if "lastState" in old else {})}

    def _waiting(self, container, reason: str, message: str, phase: str = "Pending") -> None:
        self._container_status(container, {"waiting": {"reason": reason, "message": message}})
        self._patch_status(phase, ready=self._mains_ready())

    def _mains_ready(self) -> bool:
        return all(self.statuses.get(c.name, {}).get("ready") for c in self.pod.spec.containers)

    def _crash_loop_back_off(self, container, phase: str) -> float:
        """A container that exited is restarted after a back-off, in CrashLoopBackOff meanwhile, with
        its restart count and last state; the seconds to wait."""
        status = self.statuses[container.name]
        status["restartCount"] += 1
        status["lastState"] = status["state"]
        wait = back_off_s(status["restartCount"])
        meta = self.pod.metadata
        self._waiting(container, "CrashLoopBackOff", f"back-off {wait:.0f}s restarting failed "
                      f"container={container.name} pod={meta.name}_{meta.namespace}({meta.uid})", phase)
        return wait

    def _pulled(self, container) -> bool:
        """Pull the container's image, backing off as a kubelet does while it cannot; False once the
        pod is being stopped."""
        failures = 0
        while (error := pull_error(container.image or "")) is not None:
            failures += 1
            self._waiting(container, "ErrImagePull", error)
            if self.terminating.wait(1.0):
                return False
            self._waiting(container, "ImagePullBackOff", back_off_message(container.image))
            if self.terminating.wait(back_off_s(failures)):
                return False
        return True

    # --- running ----------------------------------------------------------------------------------
    def _start(self, container, volumes, sa_dir) -> subprocess.Popen:
        image = loaded_image(self.kubelet.images_file, container.image or "")
        env = container_env(self.core, self.pod, container, self.pod_ip, self.kubelet.apiserver_port,
                            image["env"] if image else None)
        hosts = self.kubelet.hosts.file_for(self.pod.metadata.namespace, self.dir / f"{container.name}.hosts")
        argv = container_argv(container, env, volumes, sa_dir, hosts, run_options(self.pod, container, image) if image else [])
        logfile = open(self.dir / f"{container.name}.log", "ab")
        # From an image, the working directory is inside its root: pod_exec goes there after the chroot.
        cwd = str(self.dir) if image else container.working_dir or str(self.dir)
        proc = subprocess.Popen(argv, env=env, stdout=logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=cwd, start_new_session=True)
        logfile.close()
        self.procs[container.name] = proc
        if self.terminating.is_set():  # stopped while this one started: terminate() may not have seen it
            self._terminate(proc, 0)
        self._container_status(container, {"running": {"startedAt": now()}})
        log.info("pod %s/%s: started %s (pid %d, log pods/%s/%s.log)%s", self.pod.metadata.namespace,
                 self.pod.metadata.name, container.name, proc.pid, self.pod.metadata.uid, container.name,
                 f" from the image {container.image}" if image else "")
        return proc

    def _finish(self, container, code: int) -> None:
        log.info("pod %s/%s: %s exited %d (log pods/%s/%s.log)", self.pod.metadata.namespace, self.pod.metadata.name,
                 container.name, code, self.pod.metadata.uid, container.name)
        said = self._termination_message(container) if code != 0 else ""
        self._container_status(container, {"terminated": {
            "exitCode": code, "reason": "Completed" if code == 0 else "Error",
            "startedAt": self.statuses[container.name]["state"].get("running", {}).get("startedAt", now()),
            "finishedAt": now(), **({"message": said} if said else {})}})

    def _termination_message(self, container) -> str:
        """A failed container's last words where it asks for them (terminationMessagePolicy
        FallbackToLogsOnError: the kubelet takes the log's last 80 lines, at most 2,048 bytes)."""
        if container.termination_message_policy != "FallbackToLogsOnError":
            return ""
        try:
            tail = (self.dir / f"{container.name}.log").read_bytes()[-2048:]
        except OSError:
            return ""
        return b"\n".join(tail.splitlines()[-80:]).decode(errors="replace")

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
        volumes = volume_sources(self.core, self.pod, self.dir, self.kubelet.volumes_dir)
        sa_dir = service_account_dir(self.core, self.pod, self.dir)
        spec = self.pod.spec
        sidecars = []
        self._patch_status("Pending")
        for container in spec.init_containers or []:
            if not self._pulled(container):
                return self._stopped_before_start()
            if container.restart_policy == "Always":
                proc = self._started_sidecar(container, volumes, sa_dir)
                if proc is None:
                    return self._stopped_before_start()
                sidecars.append((container, proc))
                self.statuses[container.name]["ready"] = True
                self._patch_status("Pending")
            else:
                proc = self._start(container, volumes, sa_dir)
                code = proc.wait()
                self._finish(container, code)
                if code != 0:
                    self._stop_all(0)
                    self._patch_status("Failed", message=f"init container {container.name} exited {code}")
                    return
        if not all(self._pulled(c) for c in spec.containers):
            return self._stopped_before_start()
        with ThreadPoolExecutor(len(spec.containers), thread_name_prefix=self.name) as pool:
            runs = {c.name: pool.submit(self._run_main, c, volumes, sa_dir) for c in spec.containers}
        codes = {name: run.result() for name, run in runs.items()}  # an exception fails the pod (run)
        for container, proc in sidecars:  # sidecars stop after the main containers, as in Kubernetes
            self._terminate(proc, 10)
            self._finish(container, proc.returncode if proc.returncode is not None else 137)
        # Also when the pod is being deleted: a Job's pods keep the job-tracking finalizer until
        # the Job controller sees them terminal, and a deleted pod left "Running" would hold its
        # node's GPUs for good (a real kubelet reports the final phase too).
        failed = {n: c for n, c in codes.items() if c != 0}
        self._patch_status("Failed" if failed else "Succeeded",
                           message=f"containers exited {failed}" if failed else None)

    def _run_main(self, container, volumes, sa_dir) -> int:
        """One main container to its last exit code, started again in place after each exit the pod's
        restartPolicy restarts (after a back-off), until the pod is stopped."""
        try:
            return self._supervise(container, volumes, sa_dir)
        except Exception:
            self.terminate(0)  # the other main containers stop too, so the pod fails rather than hangs
            raise

    def _supervise(self, container, volumes, sa_dir) -> int:
        while True:
            proc = self._start(container, volumes, sa_dir)
            self.statuses[container.name]["ready"] = True
            self._patch_status("Running", ready=self._mains_ready())
            code = proc.wait()
            self._finish(container, code)
            if self.terminating.is_set() or not restarts(self.pod.spec.restart_policy, code):
                return code
            if self.terminating.wait(self._crash_loop_back_off(container, "Running")):
                return code

    def _stopped_before_start(self) -> None:
        # Terminal, as a kubelet reports it: a Job's pod keeps its tracking finalizer until then.
        self._stop_all(0)
        self._patch_status("Failed", message="stopped before its containers started")

    def _started_sidecar(self, container, volumes, sa_dir) -> subprocess.Popen | None:
        """A native sidecar, once its startup probe passes. One that exits or fails the probe first is
        restarted after a back-off, in CrashLoopBackOff meanwhile (restartPolicy Always); None once
        the pod is being stopped."""
        while True:
            proc = self._start(container, volumes, sa_dir)
            if wait_started(container, proc, self.pod_ip, self.terminating):
                return proc
            if self.terminating.is_set():
                return None
            self._terminate(proc, 0)
            self._finish(container, proc.returncode)
            if self.terminating.wait(self._crash_loop_back_off(container, "Pending")):
                return None

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
            for proc in group:  # one gone in between must not leave the others (its sidecars) running
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait()

    def terminate(self, grace_s: float) -> None:
        self.terminating.set()
        self._stop_all(grace_s)
