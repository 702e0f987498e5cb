"""Fixtures for the operator's tests (the CRD on the session's control plane is tests/conftest.py's): the operator
itself running as a real process, and `run`: one DatasetGeneration with its volumes and an operator."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client

from draftgen_contracts import names
from draftgen_dev.builders import SpecBuilder
from draftgen_dev.demo_assets import build_model, write_datasets
from jobrunner.shared.output import iter_records, record_files
from tests.conftest import LOGS_ON_FAILURE, wait_for


class Operator:
    """`draftgen operator` as a subprocess, stopped by its PID; with `image`, run from draftgen's image
    (tests/conftest.py's draftgen_image) as the chart runs it: its user, its read-only root, /tmp the
    one writable folder, a kubeconfig of its own."""

    def __init__(self, cluster, log_dir: Path, fold_interval: float = 1.0, extra_env: dict | None = None,
                 metrics_port: int = 0, liveness_port: int = 0, image=None, args: tuple[str, ...] = ()):
        self.cluster = cluster
        self.log = log_dir / "operator.log"
        self.args = args
        self.liveness = f"http://127.0.0.1:{liveness_port}/healthz" if liveness_port else ""
        self.image = image
        self.dir = log_dir / "operator"
        self.env = {**(image.env if image else os.environ), "KUBECONFIG": str(cluster.kubeconfig),
                    "DRAFTGEN_FOLD_INTERVAL": str(fold_interval),
                    "DRAFTGEN_EXTRA_POD_LABELS": "draftgen.io/local-kubelet=true",
                    "DRAFTGEN_METRICS_PORT": str(metrics_port), "DRAFTGEN_METRICS_ADDR": "127.0.0.1",
                    **({"DRAFTGEN_RUNNER_IMAGE": image.ref, "KUBECONFIG": "/etc/draftgen/kubeconfig"} if image else {}),
                    **(extra_env or {})}
        self.proc: subprocess.Popen | None = None

    def argv(self, scope: list[str]) -> list[str]:
        command = ["draftgen", "operator", "--liveness", self.liveness, *scope, *self.args]
        if self.image is None:
            return [sys.executable, "-m", "draftgen_operator.cli", *command[1:]]
        config = self.dir / "config"
        config.mkdir(parents=True, exist_ok=True)
        # The admin's credentials inline, in a file of the image's user (the cluster's own are root's).
        (config / "kubeconfig").write_text(self.cluster.kubeconfig_inline())
        tmp = self.dir / "tmp"
        tmp.mkdir(exist_ok=True)
        for path in (config, config / "kubeconfig", tmp):
            os.chown(path, *(int(i) for i in self.image.user.split(":")))
        return self.image.argv(command, {str(config): "/etc/draftgen:ro", str(tmp): "/tmp"})

    def start(self, namespace: str | None = None) -> "Operator":
        scope = ["--namespace", namespace] if namespace else []
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv(scope), env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        return self

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def check_alive(self) -> None:
        if self.proc and self.proc.poll() is not None:
            raise AssertionError(f"operator exited with {self.proc.returncode}:\n{self.log.read_text()[-4000:]}")


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)




@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    return build_model(tmp_path_factory.mktemp("models") / "tiny")


class Run:
    """One DatasetGeneration in its own namespace (or `beside` another), with its volumes and an operator
    watching it."""

    def __init__(self, cluster, k8s, namespace, tiny_model, tmp_path, name="qs", extraction=False, budgets=None,
                 volumes=True, metrics_port=0, liveness_port=0, image=None, operator_env=None, operator_args=(),
                 beside: "Run | None" = None, **spec_overrides):
        """`beside`: another object in that run's namespace, on its volumes, watched by its operator."""
        self.cluster, self.namespace, self.name = cluster, namespace, name
        self.custom, self.batch, self.core = (client.CustomObjectsApi(k8s), client.BatchV1Api(k8s),
                                              client.CoreV1Api(k8s))
        # The quickstart with faster tokens (400 a second per request); `body` is what is applied.
        self.body = (SpecBuilder.quickstart(name).server_args(replace={"100": "400"}).extraction(extraction)
                     .budgets(*(budgets or (3000, 2000, 2000))).set(**spec_overrides).obj())
        self.data = self.models = None
        self.applied = False
        if beside is not None:
            self.data, self.models, self.operator = beside.data, beside.models, beside.operator
            return
        if image is not None:  # every pod, the server's included, from draftgen's image (on the local kubelet)
            cluster.load_image(image.ref, image.as_json())
            self.body["spec"]["runnerImage"] = self.body["spec"]["server"]["image"] = image.ref
        if volumes:
            self.make_volumes(tiny_model, owner=image.user if image else None)
        self.operator = Operator(cluster, tmp_path, metrics_port=metrics_port, liveness_port=liveness_port,
                                 image=image, extra_env=operator_env, args=operator_args).start(namespace)

    def make_volumes(self, tiny_model, claims=("models", "data"), owner: str | None = None):
        """The claims' folders; `owner` ("uid:gid"), the user the pods run as, owns the data (a hostPath
        volume gets no fsGroup: its owner is whoever prepared it)."""
        if "models" in claims:
            self.models = self.cluster.create_local_volume(self.namespace, "models")
            shutil.copytree(tiny_model, self.models / "tiny")
        if "data" in claims:
            self.data = self.cluster.create_local_volume(self.namespace, "data")
            write_datasets(self.data / "prompts", rows_per_dataset=200)
            for path in [self.data, *self.data.rglob("*")] if owner else []:
                os.chown(path, *(int(i) for i in owner.split(":")))

    def apply(self):
        self.applied = True
        return self.custom.create_namespaced_custom_object(names.GROUP, names.VERSION, self.namespace, names.PLURAL, self.body)

    def get(self) -> dict:
        return self.custom.get_namespaced_custom_object(names.GROUP, names.VERSION, self.namespace, names.PLURAL, self.name)

    def status(self) -> dict:
        return self.get().get("status") or {}

    def patch_spec(self, change):
        """Read, change, replace, as `kubectl edit` does: again on a conflict (the operator writes the
        object's status meanwhile, which moves its resourceVersion)."""
        for attempt in range(5):
            obj = self.get()
            change(obj["spec"])
            try:
                self.custom.replace_namespaced_custom_object(names.GROUP, names.VERSION, self.namespace, names.PLURAL,
                                                             self.name, obj)
                return
            except client.ApiException as e:
                if e.status != 409 or attempt == 4:
                    raise

    def wait_phase(self, *phases, timeout_s=180):
        def reached():
            self.operator.check_alive()
            return self.status().get("phase") in phases
        wait_for(reached, timeout_s, f"phase {phases} (now {self.status().get('phase')})", self.cluster, interval_s=0.5)
        return self.status()

    def unfinished_jobs(self) -> dict[str, client.V1Job]:
        """The Jobs that have not succeeded (a succeeded preflight Job stays, as a record)."""
        return {n: j for n, j in self.jobs().items() if not j.status.succeeded}

    def jobs(self) -> dict[str, client.V1Job]:
        return {j.metadata.name: j for j in self.batch.list_namespaced_job(
            self.namespace, label_selector=f"{names.LABEL_NAME}={self.name}").items}

    def pods(self, component="generate"):
        return self.core.list_namespaced_pod(
            self.namespace, label_selector=f"{names.LABEL_NAME}={self.name},{names.LABEL_COMPONENT}={component}").items

    def pods_of_replica(self, replica: int):
        return [p for p in self.pods() if (p.metadata.labels or {}).get(names.LABEL_REPLICA) == str(replica)]

    def replica_tokens(self, replica: int) -> int:
        reports = [r for r in self.status().get("replicas") or [] if r.get("index") == replica]
        return sum((d.get("tokens") or 0) for r in reports for d in r.get("datasets") or [])

    def generate_pid(self, replica: int) -> int:
        """The process id of the running generate container of `replica`."""
        pods = {p.metadata.name for p in self.pods_of_replica(replica) if p.status.phase == "Running"}
        return self.process_of(pods, b"generate")

    def process_of(self, pods: set[str], word: bytes) -> int:
        """The process id of a container of one of `pods` whose command has `word` (the local kubelet
        runs containers as processes of this machine, each with HOSTNAME = its pod's name)."""
        for proc in Path("/proc").iterdir():
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                env = dict(kv.split(b"=", 1) for kv in (proc / "environ").read_bytes().split(b"\0") if b"=" in kv)
            except (OSError, ValueError):
                continue
            if word in argv and env.get(b"HOSTNAME", b"").decode() in pods:
                return int(proc.name)
        raise AssertionError(f"no process with {word!r} in its command in pods {pods}")

    def records(self) -> list[dict]:
        root = self.data / self.name
        return [r for f in record_files(str(root)) for r in iter_records(f)]

    def kubectl(self, *args: str) -> str:
        """The real kubectl, in this run's namespace: what a user sees."""
        from draftgen_dev.cluster.binaries import KUBECTL_HELM, ensure
        argv = [str(ensure(KUBECTL_HELM) / "kubectl"), "--kubeconfig", str(self.cluster.kubeconfig),
                "-n", self.namespace, *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout

    def events(self) -> list[str]:
        return [e.reason for e in self.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={self.name}").items]

    def stop(self, failed: bool = False, label: str = ""):
        """Stop its operator; on a failure its log is kept beside the control plane's, as `label`."""
        self.operator.stop()
        if failed:
            LOGS_ON_FAILURE.mkdir(exist_ok=True)
            shutil.copy(self.operator.log, LOGS_ON_FAILURE / f"{label or self.name}-operator.log")


@pytest.fixture
def run(cluster, k8s, crd, namespace, tiny_model, tmp_path, request):
    runs = []

    def make(**kwargs) -> Run:
        r = Run(cluster, k8s, namespace, tiny_model, tmp_path, **kwargs)
        runs.append(r)
        return r

    yield make
    for r in runs:
        r.stop(request.node.rep_call.failed, request.node.name)
