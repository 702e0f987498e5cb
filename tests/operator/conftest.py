"""Fixtures for the operator's tests: the CRD installed on the session's control plane, and the
operator itself running as a real process (started by the test that needs it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tests.conftest import REPO, wait_for

CRD = REPO / "crds" / "datasetgenerations.draftgen.io.yaml"


@pytest.fixture(scope="session")
def crd(cluster):
    api = cluster.api_client()
    ext = client.ApiextensionsV1Api(api)
    body = yaml.safe_load(CRD.read_text())
    try:
        ext.create_custom_resource_definition(body)
    except client.ApiException as e:
        if e.status != 409:
            raise

    def established():
        got = ext.read_custom_resource_definition(body["metadata"]["name"])
        return any(c.type == "Established" and c.status == "True" for c in got.status.conditions or [])

    wait_for(established, 30, "the CRD to be established", cluster)
    # Discovery lags the Established condition by a moment.
    wait_for(lambda: _served(api), 30, "the CRD to be served")
    return body


def _served(api) -> bool:
    try:
        client.CustomObjectsApi(api).list_cluster_custom_object("draftgen.io", "v1alpha1", "datasetgenerations")
        return True
    except client.ApiException:
        return False


def manifest(name: str = "demo", **spec_overrides) -> dict:
    spec = {
        "model": {"claimName": "models", "path": "tiny"},
        "server": {"image": "example.invalid/sglang:v0.5.23", "replicas": 2},
        "datasets": [{"name": "chat", "path": "prompts/chat.jsonl", "budgetTokens": 4000},
                     {"name": "code", "path": "prompts/code.jsonl", "budgetTokens": 3000}],
        "output": {"claimName": "data"},
    }
    spec.update(spec_overrides)
    return {"apiVersion": "draftgen.io/v1alpha1", "kind": "DatasetGeneration", "metadata": {"name": name},
            "spec": spec}


class Operator:
    """`draftgen operator` as a subprocess, stopped by its PID."""

    def __init__(self, cluster, log_dir: Path, fold_interval: float = 1.0, extra_env: dict | None = None,
                 metrics_port: int = 0, liveness_port: int = 0):
        self.cluster = cluster
        self.log = log_dir / "operator.log"
        self.liveness = f"http://127.0.0.1:{liveness_port}/healthz" if liveness_port else ""
        self.env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "DRAFTGEN_FOLD_INTERVAL": str(fold_interval),
                    "DRAFTGEN_EXTRA_POD_LABELS": "draftgen.io/local-kubelet=true",
                    "DRAFTGEN_METRICS_PORT": str(metrics_port), "DRAFTGEN_METRICS_ADDR": "127.0.0.1",
                    **(extra_env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self, namespace: str | None = None) -> "Operator":
        scope = ["--namespace", namespace] if namespace else []
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "draftgen.cli", "operator", "--liveness", self.liveness,
                                          *scope],
                                         env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
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
