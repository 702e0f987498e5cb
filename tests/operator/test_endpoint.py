"""A server that already runs (spec.server.endpoint): the user's own SGLang Deployment (here the
simulator, run by the local kubelet, with both keys), and the operator starting only the generation
clients against it, on the CPU stages' nodes, with the keys from the user's Secret. Three runs share
one server, one namespace and one operator, as a team's runs would."""

from __future__ import annotations

import shutil

import pytest
from kubernetes import client

from draftgen_contracts import names
from draftgen_dev.cluster.controlplane import LOCAL_KUBELET_LABEL
from tests.conftest import wait_for
from tests.operator.conftest import Run
from tests.scenarios import check_records_match_status, overshoot_bound

PORT = 30000
KEYS = {"api": "api-key-of-the-team", "admin": "admin-key-of-the-team"}  # the team's Secret
ENDPOINT_KEY_FIELDS = {"api": "apiKey", "admin": "adminApiKey"}


def serving_deployment(args: list[str], model_path: str) -> dict:
    """The team's server: the simulator with SGLang's flags, both keys, probed on /ready."""
    pod_labels = {"app": "sglang", LOCAL_KUBELET_LABEL: "true"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sglang"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "sglang"}},
        "template": {"metadata": {"labels": pod_labels}, "spec": {"containers": [{
            "name": "sglang", "image": "sglang:v0.5.23", "command": ["jobrunner", "simulate"],
            "args": ["--host", "$(POD_IP)", "--port", str(PORT), "--model-path", model_path, *args,
                     "--api-key", KEYS["api"], "--admin-api-key", KEYS["admin"]],
            "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": PORT}, "periodSeconds": 1}}]}}}}


def serving_service() -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "sglang"},
            "spec": {"selector": {"app": "sglang"}, "ports": [{"port": PORT, "targetPort": PORT}]}}


def serving_pod_ip(core: client.CoreV1Api, namespace: str) -> str:
    seen = []

    def ready():
        pods = core.list_namespaced_pod(namespace, label_selector="app=sglang").items
        seen[:] = [(p.metadata.name, p.spec.node_name, p.status.phase, p.status.container_statuses) for p in pods]
        for pod in pods:
            conditions = {c.type: c.status for c in pod.status.conditions or []}
            if conditions.get("Ready") == "True":
                return pod.status.pod_ip
        return None
    try:
        return wait_for(ready, 60, "the team's server ready")
    except AssertionError as e:
        raise AssertionError(f"{e}: {seen}") from None


def start_the_teams_server(api, namespace: str, args: list[str], model_path: str) -> None:
    """The team's server running: its Secret, Deployment and Service."""
    core = client.CoreV1Api(api)
    core.create_namespaced_secret(namespace, {"metadata": {"name": "sglang-keys"}, "stringData": KEYS})
    client.AppsV1Api(api).create_namespaced_deployment(namespace, serving_deployment(args, model_path))
    core.create_namespaced_service(namespace, serving_service())
    serving_pod_ip(core, namespace)


def against_the_teams_server(r, *keys: str) -> None:
    """The run's spec pointed at the team's server through its Service, as a team's clients reach it,
    with the Secret's `keys` (api, admin)."""
    server = r.body["spec"]["server"]
    for key in ("image", "command", "args"):
        del server[key]
    server["endpoint"] = {"url": f"http://sglang.{r.namespace}.svc:{PORT}",
                          **{ENDPOINT_KEY_FIELDS[key]: {"name": "sglang-keys", "key": key} for key in keys}}


@pytest.fixture(scope="module")
def team(cluster, crd, module_namespace, tiny_model, tmp_path_factory, request):
    """One team's server in one namespace and three runs against it under one operator: the first is
    applied by its test (which watches its pods from the start), the other two here, so they run
    meanwhile. The model `other` is a copy of the tiny one that the server does not serve."""
    api = cluster.api_client()
    first = Run(cluster, api, module_namespace, tiny_model, tmp_path_factory.mktemp("endpoint"), name="both-keys",
                extraction=False)
    shutil.copytree(first.models / "tiny", first.models / "other")
    start_the_teams_server(api, module_namespace, first.body["spec"]["server"]["args"], "/models/tiny")
    runs = {"both-keys": first, **{name: Run(cluster, api, module_namespace, tiny_model, None, name=name,
                                             extraction=False, beside=first) for name in ("other-model", "api-key")}}
    against_the_teams_server(first, "api", "admin")
    for name in ("other-model", "api-key"):
        against_the_teams_server(runs[name], "api")
    runs["other-model"].body["spec"]["model"]["path"] = "other"
    runs["other-model"].apply()
    runs["api-key"].apply()
    yield runs
    first.stop(request.session.testsfailed > 0, "endpoint")
    api.close()


def test_a_server_that_already_runs_gets_generation_clients_alone_and_every_budget_is_exact(team):
    r = team["both-keys"]
    core = r.core
    r.apply()
    seen: dict[str, client.V1Pod] = {}  # every pod of the run, as last seen (the Jobs go when done)

    def done():
        for pod in core.list_namespaced_pod(r.namespace, label_selector=f"{names.LABEL_NAME}={r.name}").items:
            seen[pod.metadata.name] = pod
        return r.status().get("phase") == "Succeeded"
    wait_for(done, 240, "the run Succeeded", interval_s=0.5)
    status = r.status()

    check_records_match_status(status, r.records())  # every budget exact: the cut reached the team's server
    for d in status["datasets"]:
        assert d["tokens"] == d["budgetTokens"], d
    assert status["estimate"]["gpuHours"] == 0  # the GPUs are the server owner's
    generation = [p for p in seen.values() if p.metadata.labels.get(names.LABEL_COMPONENT) == "generate"]
    assert len({p.metadata.labels[names.LABEL_REPLICA] for p in generation}) == 2
    for pod in seen.values():
        assert not pod.spec.init_containers, pod.metadata.name  # no server of draftgen's
        assert all("nvidia.com/gpu" not in ((c.resources.limits or {}) | (c.resources.requests or {}))
                   for c in pod.spec.containers), pod.metadata.name
    assert not core.list_namespaced_secret(r.namespace, field_selector=f"metadata.name={names.keys_secret_name(r.name)}").items


def test_a_server_of_another_model_is_refused_by_the_preflight_and_said_on_the_object(team):
    r = team["other-model"]
    status = r.wait_phase("Failed", timeout_s=120)
    said = " ".join(c.get("message", "") for c in status["conditions"])
    assert "serves ['/models/tiny'], not 'other'" in said, status["conditions"]
    assert not [p for p in r.core.list_namespaced_pod(r.namespace, label_selector=f"{names.LABEL_NAME}={r.name}").items
                if p.metadata.labels.get(names.LABEL_COMPONENT) == "generate"]


def test_without_the_servers_admin_key_the_run_aborts_by_disconnect_and_says_so_on_the_object(team):
    """The team hands out its API key only: nothing can be cut, so every budget is met by complete
    responses (as atBudget: abort), and condition AtBudget with a Warning event say why."""
    r = team["api-key"]
    status = r.wait_phase("Succeeded", timeout_s=240)
    check_records_match_status(status, r.records(), bound=overshoot_bound({**r.body["spec"], "atBudget": "abort"}))
    assert not any(rec.get("cut_at_budget") for rec in r.records())
    at_budget = next(c for c in status["conditions"] if c["type"] == "AtBudget")
    assert at_budget["status"] == "False" and at_budget["reason"] == "CutOff"
    assert "refuses /abort_request without its admin key" in at_budget["message"]
    assert "CutOff" in r.events()
