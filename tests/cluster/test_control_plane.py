"""The local control plane is a real one: each test here would fail against a mock of an API server."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kubernetes import client

from draftgen_dev.cluster.nodes import GPU_RESOURCE
from tests.conftest import is_gone, wait_for

GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


def gpu_job(name: str, gpus: int) -> dict:
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"nvidia.com/gpu.present": "true"},
            "tolerations": [GPU_TOLERATION],
            "containers": [{"name": "main", "image": "example.invalid/sglang:latest",
                            "resources": {"limits": {GPU_RESOURCE: str(gpus)}}}],
        }}},
    }


def test_gpu_job_is_scheduled_onto_a_gpu_node_and_completes(cluster, k8s, namespace):
    batch, core = client.BatchV1Api(k8s), client.CoreV1Api(k8s)
    batch.create_namespaced_job(namespace, gpu_job("eight-gpus", 8))

    def job_complete():
        job = batch.read_namespaced_job("eight-gpus", namespace)
        return any(c.type == "Complete" and c.status == "True" for c in job.status.conditions or [])

    wait_for(job_complete, 60, "the 8-GPU Job to complete", cluster)
    pods = core.list_namespaced_pod(namespace, label_selector="job-name=eight-gpus").items
    assert len(pods) == 1
    node = core.read_node(pods[0].spec.node_name)
    assert node.metadata.labels["nvidia.com/gpu.product"].startswith("NVIDIA-RTX-PRO-6000")
    assert node.status.allocatable[GPU_RESOURCE] == "8"


def test_pod_asking_for_nine_gpus_stays_pending_with_failed_scheduling(cluster, k8s, namespace):
    core = client.CoreV1Api(k8s)
    pod = gpu_job("x", 9)["spec"]["template"]
    core.create_namespaced_pod(namespace, {"metadata": {"name": "nine-gpus"}, **pod})

    def failed_scheduling_event():
        events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=nine-gpus").items
        return [e for e in events if e.reason == "FailedScheduling"]

    events = wait_for(failed_scheduling_event, 60, "a FailedScheduling event", cluster)
    assert "nvidia.com/gpu" in events[0].message
    time.sleep(1)
    pod = core.read_namespaced_pod("nine-gpus", namespace)
    assert pod.status.phase == "Pending" and pod.spec.node_name is None


def test_pod_without_gpu_toleration_never_lands_on_a_gpu_node(cluster, k8s, namespace):
    core = client.CoreV1Api(k8s)
    core.create_namespaced_pod(namespace, {"metadata": {"name": "cpu-only"}, "spec": {
        "containers": [{"name": "main", "image": "example.invalid/x"}]}})
    pod = wait_for(lambda: core.read_namespaced_pod("cpu-only", namespace).spec.node_name, 60, "scheduling", cluster)
    assert pod.startswith("cpu-node-")


def test_deleting_an_owner_garbage_collects_its_children(cluster, k8s, namespace):
    core = client.CoreV1Api(k8s)
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid,
           "controller": True, "blockOwnerDeletion": True}
    core.create_namespaced_secret(namespace, {"metadata": {"name": "child", "ownerReferences": [ref]}})
    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Foreground")

    wait_for(lambda: is_gone(core.read_namespaced_secret, "child", namespace), 60,
             "the garbage collector to delete the child", cluster)


def test_job_with_invalid_template_is_refused_by_the_api_server(k8s, namespace):
    job = gpu_job("bad", 1)
    job["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    with pytest.raises(client.ApiException) as err:
        client.BatchV1Api(k8s).create_namespaced_job(namespace, job)
    assert err.value.status == 422
    assert "spec.template.spec.restartPolicy" in err.value.body


def test_service_account_without_role_binding_is_forbidden_to_list_pods(cluster, k8s, namespace):
    core = client.CoreV1Api(k8s)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "nobody"}})
    token = core.create_namespaced_service_account_token(
        "nobody", namespace, {"spec": {"audiences": [], "expirationSeconds": 600}}).status.token

    as_sa = client.Configuration()
    as_sa.host = cluster.server
    as_sa.ssl_ca_cert = str(cluster.pki.ca_cert)
    as_sa.api_key = {"authorization": f"Bearer {token}"}
    sa_core = client.CoreV1Api(client.ApiClient(as_sa))
    with pytest.raises(client.ApiException) as err:
        sa_core.list_namespaced_pod(namespace)
    assert err.value.status == 403
    assert f"system:serviceaccount:{namespace}:nobody" in err.value.body

    # The same token works once RBAC allows it: the 403 above came from authorization, not authentication.
    rbac = client.RbacAuthorizationV1Api(k8s)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "pod-reader"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "nobody-reads"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                           "name": "pod-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "nobody", "namespace": namespace}]})
    wait_for(lambda: _can_list(sa_core, namespace), 10, "the RoleBinding to take effect")


def _can_list(core, namespace) -> bool:
    try:
        core.list_namespaced_pod(namespace)
        return True
    except client.ApiException:
        return False


def test_the_whole_run_has_one_control_plane_that_every_worker_attaches_to(cluster, request):
    """One API server for the run, in the run's folder (tests/conftest.py), however many workers."""
    from tests.conftest import control_plane_folder

    folder = control_plane_folder(request.config)
    assert cluster.state_dir == folder and (folder / "state.json").exists()
    servers = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"kube-apiserver") and any(str(folder.parent).encode() in a for a in argv):
            servers.append(int(proc.name))
    assert len(servers) == 1, servers
