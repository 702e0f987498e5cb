"""Shared fixtures: the local Kubernetes control plane, started once per test session, and the CRD on it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LOGS_ON_FAILURE = REPO / ".test-logs"
FAILED_CONTAINERS = "failed-containers.txt"  # kept with the logs of a failed session


# Enough 8-GPU nodes that the tests running side by side (each run's replicas take a node each, a
# replica across nodes two) never wait for one another's pods, nor for a namespace still going.
TEST_GPU_NODES = 8
ALONE = "cluster_alone"
IMAGE_MOUNTED = "image-mounted"  # in the control plane's folder: the image whose root the run mounted  # the mark of a module that changes what every test on the cluster sees


def control_plane_folder(config) -> Path:
    """Where the run's one control plane lives: in the run's temporary folder, which holds each
    pytest-xdist worker's own, so that every worker finds it."""
    base = config._tmp_path_factory.getbasetemp()
    return (base.parent if hasattr(config, "workerinput") else base) / "control-plane"


@pytest.fixture(scope="session")
def cluster(request):
    """A real control plane (etcd, kube-apiserver, controller-manager, scheduler, KWOK, local kubelet),
    one for the whole run: the first worker that needs it starts it, the others attach to it
    (draftgen_dev.cluster.sharing), and stop_control_plane stops it once every test has ended."""
    from draftgen_dev.cluster.controlplane import LocalCluster
    from draftgen_dev.cluster.nodes import default_node_shapes
    from draftgen_dev.cluster.sharing import shared_cluster

    def start(folder: Path) -> LocalCluster:
        return LocalCluster(folder, nodes=default_node_shapes(gpu_nodes=TEST_GPU_NODES)).start()

    return shared_cluster(control_plane_folder(request.config), start)


def stop_control_plane(session) -> None:
    """At the end of the run, in the process that ran no test itself: stop the control plane, and keep
    its components' logs in .test-logs/ when any test failed."""
    from draftgen_dev.cluster.sharing import stop_shared_cluster
    from draftgen_dev.image.rootfs import unmount

    folder = control_plane_folder(session.config)
    stopped = stop_shared_cluster(folder)
    if (folder / IMAGE_MOUNTED).exists():
        unmount((folder / IMAGE_MOUNTED).read_text(), run_owner(session.config))
    if stopped is not None and session.testsfailed:
        kept = stopped.keep_logs(LOGS_ON_FAILURE)
        print(f"\ncontrol plane logs kept in {kept}")
        # A worker's output is not shown: the root conftest's summary prints this file.
        (kept / FAILED_CONTAINERS).write_text(stopped.failed_containers())


@pytest.fixture(scope="module", autouse=True)
def cluster_turn(request):
    """A module that uses the control plane holds a turn on it while it runs: shared with the other
    workers' modules, or alone where it is marked `cluster_alone` (draftgen_dev.cluster.sharing)."""
    module = request.module
    uses = [item for item in request.session.items if getattr(item, "module", None) is module
            and "cluster" in getattr(item, "fixturenames", ())]
    if not uses:
        yield
        return
    from draftgen_dev.cluster.sharing import ClusterTurns

    turns = ClusterTurns(control_plane_folder(request.config))
    with turns.alone() if any(item.get_closest_marker(ALONE) for item in uses) else turns.shared():
        yield


@pytest.fixture
def k8s(cluster):
    """A kubernetes ApiClient on the local cluster; fails the test with a component's log if one died."""
    cluster.check_alive()
    api = cluster.api_client()
    yield api
    api.close()
    cluster.check_alive()


@contextmanager
def fresh_namespace(api, label: str) -> Iterator[str]:
    """A namespace named after `label`, deleted afterwards (its objects go with it)."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    name = f"t-{label[:40].lower().replace('_', '-').strip('-')}-{os.getpid() % 10000}-{int(time.time() * 1000) % 100000}"
    name = "".join(ch for ch in name if ch.isalnum() or ch == "-")[:63].strip("-")
    core.create_namespace({"metadata": {"name": name}})
    # Pods need the namespace's default ServiceAccount, which the controller-manager creates.
    wait_for(lambda: core.list_namespaced_service_account(name).items, 30, f"default ServiceAccount in {name}")
    yield name
    _release_finalizers(api, name)
    core.delete_namespace(name)


def _release_finalizers(api, namespace: str) -> None:
    """Drop the finalizer kopf puts on every DatasetGeneration (its fold timer asks for one,
    docs/control-plane.md), which the tests' operators, stopped first, can no longer remove: the
    namespace would stay Terminating for the rest of the run, its content swept again and again by
    the namespace controller (measured: 200,000 of the API server's 230,000 requests in a run)."""
    from kubernetes import client

    from draftgen_contracts import names

    custom = client.CustomObjectsApi(api)
    try:
        objects = custom.list_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL)["items"]
    except client.ApiException as e:
        if e.status == 404:  # no CRD installed: nothing of ours
            return
        raise
    for obj in objects:
        if obj["metadata"].get("finalizers"):
            custom.patch_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL,
                                                  obj["metadata"]["name"], {"metadata": {"finalizers": []}})


@pytest.fixture
def namespace(k8s, request):
    """A fresh namespace per test."""
    with fresh_namespace(k8s, request.node.name) as name:
        yield name


@pytest.fixture(scope="module")
def module_namespace(cluster, request):
    """One namespace for a module whose tests leave nothing another of them would see (objects refused,
    dry-run or named apart). A namespace's deletion costs the API server a list and a delete of every
    kind of object in it (the namespace controller's sweep, about 100 requests measured), and the
    admission cases alone are about a hundred tests."""
    api = cluster.api_client()
    with fresh_namespace(api, request.module.__name__.rsplit(".", 1)[-1]) as name:
        yield name
    api.close()


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

    from draftgen_dev.cluster.waiting import crd_established

    api = cluster.api_client()
    ext = client.ApiextensionsV1Api(api)
    body = yaml.safe_load(CRD.read_text())
    try:
        ext.create_custom_resource_definition(body)
    except client.ApiException as e:
        if e.status != 409:
            raise

    wait_for(lambda: crd_established(api, body["metadata"]["name"]), 30, "the CRD to be established", cluster)
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
def draftgen_image(request):
    """draftgen's image, built from the Dockerfile (`make test` builds it before pytest; warm, this only
    hashes what it copies), its root mounted once for the whole run (the local kubelet runs every
    worker's pods of one image from one root), unmounted by stop_control_plane:
    draftgen_dev.image.rootfs.ImageRoot."""
    from draftgen_dev.cluster.sharing import locked
    from draftgen_dev.image.build import ensure_image
    from draftgen_dev.image.rootfs import mount

    folder = control_plane_folder(request.config)
    folder.mkdir(parents=True, exist_ok=True)
    ref = ensure_image()
    with locked(folder / "image.lock"):
        (folder / IMAGE_MOUNTED).write_text(ref)
        return mount(ref, run_owner(request.config))


def run_owner(config) -> int:
    """The process that outlives every test of the run: xdist's controller (each worker's parent), or
    the only one."""
    return os.getppid() if hasattr(config, "workerinput") else os.getpid()
