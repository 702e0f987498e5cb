"""Helpers for the chart's tests: the real helm and kubectl binaries, rendering, and API access
as a ServiceAccount (a TokenRequest token, as a pod would hold)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tests.conftest import REPO

CHART = REPO / "charts" / "draftgen"


def tool(name: str) -> str:
    from draftgen_dev.cluster.binaries import KUBECTL_HELM, ensure
    return str(ensure(KUBECTL_HELM) / name)


def helm(*args: str, check: bool = True, kubeconfig: Path | None = None) -> subprocess.CompletedProcess:
    argv = [tool("helm"), *args, *(["--kubeconfig", str(kubeconfig)] if kubeconfig else [])]
    # Past the longest --timeout a test gives Helm (helm test: 300 s), so Helm says why it stopped.
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=360)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited with {proc.returncode}:\n{proc.stderr}")
    return proc


def set_args(values: dict[str, str]) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


# The chart requires the image's repository: the tests' installs name the local build's (make image).
IMAGE_REPOSITORY = {"image.repository": "localhost/draftgen"}
OUR_IMAGE = set_args(IMAGE_REPOSITORY)
# The session's CRD is the `crd` fixture's, shared by every test: installs other than the chart's
# life test (test_chart_life.py, which adopts it) leave it alone.
SHARED_CRD = set_args({"crds.install": "false"})


def render(namespace: str = "draftgen-system", **values: str) -> list[dict]:
    """`helm template` of the chart, as objects; values as --set pairs (dots in keys are paths)."""
    out = helm("template", "draftgen", str(CHART), "--namespace", namespace,
               *set_args({**IMAGE_REPOSITORY, **values})).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def service_account_token(api: client.ApiClient, namespace: str, service_account: str) -> str:
    """A bound token for the ServiceAccount, as the kubelet mounts into its pods."""
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[],
                                                                                   expiration_seconds=3600))
    got = client.CoreV1Api(api).create_namespaced_service_account_token(service_account, namespace, request)
    return got.status.token


def token_kubeconfig(cluster, token: str, path: Path) -> Path:
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "local", "cluster": {"server": cluster.server,
                                                   "certificate-authority": str(cluster.pki.ca_cert)}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "sa"}}],
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def token_client(cluster, token: str) -> client.ApiClient:
    configuration = client.Configuration()
    configuration.host = cluster.server
    configuration.ssl_ca_cert = str(cluster.pki.ca_cert)
    configuration.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(configuration)


@pytest.fixture(scope="module")
def release_namespace(cluster):
    """A namespace for this module's chart release, enforcing the `restricted` Pod Security Standard,
    so the operator's pod is admitted only if its securityContext meets it."""
    core = client.CoreV1Api(cluster.api_client())
    name = f"chart-{int(time.time() * 1000) % 10**8}"
    core.create_namespace({"metadata": {"name": name, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}})
    yield name
    core.delete_namespace(name)

