"""The local kubelet runs labelled pods for real: processes, env, ServiceAccount token, volumes, status."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from kubernetes import client

from draftgen_dev.cluster.controlplane import LOCAL_KUBELET_LABEL
from draftgen_dev.cluster.kubelet.image_pull import pull_error, registry_host
from tests.conftest import REPO, is_gone, wait_for

MAIN = textwrap.dedent("""
    import os, urllib.request, pathlib
    from kubernetes import client, config
    config.load_incluster_config()                      # the projected ServiceAccount token, as in a real pod
    me = client.CoreV1Api().read_namespaced_pod(os.environ["POD_NAME"], os.environ["POD_NAMESPACE"])
    body = urllib.request.urlopen(f"http://{os.environ['POD_IP']}:8080/ready.txt").read().decode()
    pathlib.Path("/data/out").mkdir(exist_ok=True)
    pathlib.Path("/data/out/result.txt").write_text(f"{me.spec.node_name} {body} {os.environ['GREETING']}")
""")


def local_pod(name: str, main: list[str], sidecar: bool = False) -> dict:
    env = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
           {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
           {"name": "GREETING", "value": "hello-$(POD_NAME)"}]
    spec = {
        "restartPolicy": "Never", "serviceAccountName": "runner",
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "www", "emptyDir": {}}],
        "containers": [{"name": "main", "image": "local", "command": main, "env": env,
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
    }
    if sidecar:
        spec["initContainers"] = [{
            "name": "server", "image": "local", "restartPolicy": "Always", "env": env,
            "command": ["sh", "-c", "echo ready > /www/ready.txt && exec python -m http.server --bind $(POD_IP) 8080 -d /www"],
            "volumeMounts": [{"name": "www", "mountPath": "/www"}],
            "ports": [{"name": "http", "containerPort": 8080}],
            "startupProbe": {"httpGet": {"path": "/ready.txt", "port": "http"}, "periodSeconds": 1,
                             "failureThreshold": 30},
        }]
    return {"metadata": {"name": name, "labels": {LOCAL_KUBELET_LABEL: "true"}}, "spec": spec}


def setup_namespace(cluster, k8s, namespace):
    core, rbac = client.CoreV1Api(k8s), client.RbacAuthorizationV1Api(k8s)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "runner"}})
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "read-pods"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "runner"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                     "name": "read-pods"},
        "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": namespace}]})
    return cluster.create_local_volume(namespace, "data")


def phase(core, namespace, name):
    return core.read_namespaced_pod(name, namespace).status.phase


def test_pod_runs_with_sidecar_token_env_and_volume(cluster, k8s, namespace):
    data = setup_namespace(cluster, k8s, namespace)
    core = client.CoreV1Api(k8s)
    core.create_namespaced_pod(namespace, local_pod("ok", [sys.executable, "-c", MAIN], sidecar=True))
    wait_for(lambda: phase(core, namespace, "ok") in ("Succeeded", "Failed"), 90, "the pod to finish", cluster)
    pod = core.read_namespaced_pod("ok", namespace)
    assert pod.status.phase == "Succeeded", pod.status.message
    node, body, greeting = (data / "out" / "result.txt").read_text().split()
    assert node == pod.spec.node_name and node.startswith("gpu-node-")
    assert body == "ready" and greeting == "hello-ok"
    assert pod.status.container_statuses[0].state.terminated.exit_code == 0
    assert pod.status.init_container_statuses[0].name == "server"


def test_exit_code_fails_the_pod_and_is_reported(cluster, k8s, namespace):
    setup_namespace(cluster, k8s, namespace)
    core = client.CoreV1Api(k8s)
    core.create_namespaced_pod(namespace, local_pod("bad", [sys.executable, "-c", "raise SystemExit(3)"]))
    wait_for(lambda: phase(core, namespace, "bad") in ("Succeeded", "Failed"), 60, "the pod to finish", cluster)
    pod = core.read_namespaced_pod("bad", namespace)
    assert pod.status.phase == "Failed"
    assert pod.status.container_statuses[0].state.terminated.exit_code == 3


def test_deleting_a_running_pod_stops_its_process(cluster, k8s, namespace):
    setup_namespace(cluster, k8s, namespace)
    core = client.CoreV1Api(k8s)
    core.create_namespaced_pod(namespace, local_pod("sleeper", ["sleep", "600"]))
    wait_for(lambda: phase(core, namespace, "sleeper") == "Running", 60, "the pod to run", cluster)
    core.delete_namespaced_pod("sleeper", namespace, grace_period_seconds=2)

    wait_for(lambda: is_gone(core.read_namespaced_pod, "sleeper", namespace), 20, "the pod to be removed", cluster)


def sidecar_waiting(core, namespace, name):
    statuses = core.read_namespaced_pod(name, namespace).status.init_container_statuses or []
    return statuses[0] if statuses and statuses[0].state.waiting else None


def test_a_sidecar_that_exits_before_its_probe_passes_crash_loops_with_its_exit_code(cluster, k8s, namespace):
    setup_namespace(cluster, k8s, namespace)
    core = client.CoreV1Api(k8s)
    pod = local_pod("crashy", ["sleep", "600"], sidecar=True)
    pod["spec"]["initContainers"][0]["command"] = ["sh", "-c", "exit 7"]
    core.create_namespaced_pod(namespace, pod)
    wait_for(lambda: sidecar_waiting(core, namespace, "crashy"), 60, "the sidecar to crash", cluster)
    status = sidecar_waiting(core, namespace, "crashy")
    assert status.state.waiting.reason == "CrashLoopBackOff"
    assert status.state.waiting.message.startswith("back-off 10s restarting failed container=server pod=crashy_")
    assert status.restart_count == 1 and status.last_state.terminated.exit_code == 7
    assert phase(core, namespace, "crashy") == "Pending"  # restarted, not failed: restartPolicy Always
    core.delete_namespaced_pod("crashy", namespace, grace_period_seconds=0)
    wait_for(lambda: is_gone(core.read_namespaced_pod, "crashy", namespace), 20, "the pod to be removed", cluster)


def test_an_image_from_an_unresolvable_registry_fails_to_pull_and_backs_off(cluster, k8s, namespace):
    setup_namespace(cluster, k8s, namespace)
    core = client.CoreV1Api(k8s)
    pod = local_pod("nopull", ["sleep", "600"], sidecar=True)
    pod["spec"]["initContainers"][0]["image"] = "registry.invalid/sglang:v0"

    def pull_backing_off():
        status = sidecar_waiting(core, namespace, "nopull")
        return status is not None and status.state.waiting.reason == "ImagePullBackOff"
    core.create_namespaced_pod(namespace, pod)
    wait_for(pull_backing_off, 60, "the pull to back off", cluster)
    assert sidecar_waiting(core, namespace, "nopull").state.waiting.message == \
        'Back-off pulling image "registry.invalid/sglang:v0"'
    assert phase(core, namespace, "nopull") == "Pending"
    core.delete_namespaced_pod("nopull", namespace, grace_period_seconds=0)
    wait_for(lambda: is_gone(core.read_namespaced_pod, "nopull", namespace), 20, "the pod to be removed", cluster)


def test_image_references_name_their_registry_host():
    assert registry_host("registry.invalid/sglang:v0") == "registry.invalid"
    assert registry_host("localhost:5000/x") == "localhost"
    assert registry_host("lmsysorg/sglang:latest") == "" and registry_host("python") == ""
    assert pull_error("lmsysorg/sglang:latest") is None
    assert "lookup registry.invalid: no such host" in pull_error("registry.invalid:5000/a/b")


def pod_names(core, namespace, label):
    return {p.metadata.name for p in core.list_namespaced_pod(namespace, label_selector=label).items}


def test_a_deployments_crashing_container_restarts_in_place_and_its_replicaset_keeps_one_pod(cluster, k8s, namespace):
    """restartPolicy Always: the kubelet restarts the container with a back-off; failing the pod instead
    made the ReplicaSet create a new one for every crash (hundreds a minute)."""
    setup_namespace(cluster, k8s, namespace)
    core, apps = client.CoreV1Api(k8s), client.AppsV1Api(k8s)
    pod = local_pod("crashes", [sys.executable, "-c", "raise SystemExit(3)"])
    pod["spec"]["restartPolicy"] = "Always"
    pod["metadata"]["labels"]["app"] = "crashes"
    apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "crashes"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "crashes"}}, "template": pod}})
    seen: set[str] = set()

    def crashed_twice():
        seen.update(pod_names(core, namespace, "app=crashes"))
        assert len(seen) <= 1, f"the ReplicaSet made {len(seen)} pods: {sorted(seen)}"
        status = core.read_namespaced_pod(next(iter(seen)), namespace).status if seen else None
        return status if status and status.container_statuses and status.container_statuses[0].restart_count >= 2 \
            else None
    # Two crashes and the 10 s back-off between them (the count rises at each crash), watched all along:
    # a pod failed instead of restarted would make a new pod every second or so.
    got = wait_for(crashed_twice, 90, "two crashes in one pod", cluster, interval_s=0.5)
    status = got.container_statuses[0]
    assert got.phase == "Running" and len(seen) == 1, (got.phase, seen)
    assert status.last_state.terminated.exit_code == 3
    assert status.state.waiting is None or status.state.waiting.reason == "CrashLoopBackOff"


def test_a_volume_over_the_checkout_hides_nothing_the_container_runs_from(cluster, k8s, namespace):
    """A container runs from this checkout's Python environment; an emptyDir over the folder the
    checkout is in (as the chart's /tmp over a clone under /tmp) is mounted, and the checkout is
    brought back inside it."""
    if REPO.parent == Path("/"):
        pytest.skip("the checkout is at the root: no folder above it to mount over")
    setup_namespace(cluster, k8s, namespace)
    core = client.CoreV1Api(k8s)
    listing = f"import os; print('listing', sorted(os.listdir({str(REPO.parent)!r})))"
    pod = local_pod("covered", [sys.executable, "-c", listing])
    pod["spec"]["volumes"].append({"name": "cover", "emptyDir": {}})
    pod["spec"]["containers"][0]["volumeMounts"].append({"name": "cover", "mountPath": str(REPO.parent)})
    created = core.create_namespaced_pod(namespace, pod)
    wait_for(lambda: phase(core, namespace, "covered") in ("Succeeded", "Failed"), 60, "the pod to finish", cluster)
    log = (cluster.state_dir / "pods" / created.metadata.uid / "main.log").read_text()
    assert phase(core, namespace, "covered") == "Succeeded", log
    assert f"listing {[REPO.name]!r}" in log, log  # the volume, holding only the checkout brought back
