"""Shared fixtures: the local Kubernetes control plane, started once per test session, and the CRD on it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LOGS_ON_FAILURE = REPO / ".test-logs"
FAILED_CONTAINERS = "failed-containers.txt"  # kept with the logs of a failed session


@pytest.fixture(scope="session")
def cluster(request, tmp_path_factory):
    """A real control plane (etcd, kube-apiserver, controller-manager, scheduler, KWOK, local kubelet).

    Its components' logs are copied to .test-logs/ when any test of the session failed."""
    from draftgen_dev.cluster.controlplane import LocalCluster

    local = LocalCluster(tmp_path_factory.mktemp("cluster"))
    local.start()
    yield local
    local.stop()
    if request.session.testsfailed:
        kept = local.keep_logs(LOGS_ON_FAILURE)
        print(f"\ncontrol plane logs kept in {kept}")
        # A worker's output is not shown: the root conftest's summary prints this file.
        (kept / FAILED_CONTAINERS).write_text(local.failed_containers())


@pytest.fixture
def k8s(cluster):
    """A kubernetes ApiClient on the local cluster; fails the test with a component's log if one died."""
    cluster.check_alive()
    api = cluster.api_client()
    yield api
    api.close()
    cluster.check_alive()


@pytest.fixture
def namespace(k8s, request):
    """A fresh namespace per test, deleted afterwards (its objects go with it)."""
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    name = f"t-{request.node.name[:40].lower().replace('_', '-').strip('-')}-{os.getpid() % 10000}-{int(time.time() * 1000) % 100000}"
    name = "".join(ch for ch in name if ch.isalnum() or ch == "-")[:63].strip("-")
    core.create_namespace({"metadata": {"name": name}})
    # Pods need the namespace's default ServiceAccount, which the controller-manager creates.
    wait_for(lambda: core.list_namespaced_service_account(name).items, 30, f"default ServiceAccount in {name}")
    yield name
    core.delete_namespace(name)


@pytest.fixture
def simulator():
    """`simulator(**SimConfig fields)` -> a started SGLang simulator on a free 127.0.0.1 port, in a
    thread of its own (`.base_url`, `.stats`, `.stop()`), so sync and async tests use it alike;
    `faults=` takes a dict. Every simulator a test started is stopped after it."""
    from draftgen_simulator.config import FaultRates, SimConfig
    from draftgen_simulator.server import run_in_thread

    started = []

    def start(**fields):
        faults = fields.pop("faults", None) or {}
        _, handle = run_in_thread(SimConfig(**fields, faults=FaultRates(**faults)))
        started.append(handle)
        return handle

    yield start
    for handle in started:
        handle.stop()


def is_gone(read, *args) -> bool:
    """Whether the object that `read(*args)` reads is gone (404)."""
    from kubernetes import client

    try:
        read(*args)
        return False
    except client.ApiException as e:
        if e.status == 404:
            return True
        raise


def wait_for(predicate, timeout_s: float, what: str, cluster=None, interval_s: float = 0.1):
    """Poll until predicate() is truthy; fail (never hang) after timeout_s, or at once if a component died."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if cluster is not None:
            cluster.check_alive()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


CRD = REPO / "crds" / "datasetgenerations.draftgen.io.yaml"


@pytest.fixture(scope="session")
def crd(cluster):
    """The CRD installed on the session's control plane, once it is served."""
    import yaml
    from kubernetes import client

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
    from kubernetes import client

    try:
        client.CustomObjectsApi(api).list_cluster_custom_object("draftgen.io", "v1alpha1", "datasetgenerations")
        return True
    except client.ApiException:
        return False


@pytest.fixture(scope="session")
def draftgen_image():
    """draftgen's image, built from the Dockerfile (`make test` builds it before pytest; warm, this only
    hashes what it copies), its root mounted for the session: draftgen_dev.image.rootfs.ImageRoot."""
    from draftgen_dev.image.build import ensure_image
    from draftgen_dev.image.rootfs import mounted

    with mounted(ensure_image()) as image:
        yield image
