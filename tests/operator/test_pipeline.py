"""The operator on the real control plane, with the real `jobrunner generate` running in the generation
pods (the local kubelet) against the SGLang simulator as their sidecar: real tokens, real budgets."""

from __future__ import annotations

import copy
import json
import shutil
import urllib.request

import pytest
import yaml
from kubernetes import client

from draftgen_contracts import names
from draftgen_dev.cluster.controlplane import free_port
from draftgen_dev.demo_assets import build_model, write_datasets
from jobrunner.output import iter_records, record_files
from tests.conftest import LOGS_ON_FAILURE, REPO, wait_for
from tests.operator.conftest import Operator

EXAMPLE = yaml.safe_load((REPO / "examples" / "quickstart.yaml").read_text())
GROUP, VERSION, PLURAL = "draftgen.io", "v1alpha1", "datasetgenerations"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    return build_model(tmp_path_factory.mktemp("models") / "tiny")


class Run:
    """One DatasetGeneration in its own namespace, with its volumes and an operator watching it."""

    def __init__(self, cluster, k8s, namespace, tiny_model, tmp_path, name="qs", extraction=False, budgets=None,
                 volumes=True, metrics_port=0, liveness_port=0, **spec_overrides):
        self.cluster, self.namespace, self.name = cluster, namespace, name
        self.custom, self.batch, self.core = (client.CustomObjectsApi(k8s), client.BatchV1Api(k8s),
                                              client.CoreV1Api(k8s))
        self.body = copy.deepcopy(EXAMPLE)
        self.body["metadata"]["name"] = name
        spec = self.body["spec"]
        spec["server"]["args"] = [a if a != "100" else "400" for a in spec["server"]["args"]]  # faster tokens
        spec["extraction"]["enabled"] = extraction
        for dataset, budget in zip(spec["datasets"], budgets or (3000, 2000, 2000)):
            dataset["budgetTokens"] = budget
        spec.update(spec_overrides)
        self.data = None
        if volumes:
            self.make_volumes(tiny_model)
        self.operator = Operator(cluster, tmp_path, metrics_port=metrics_port,
                                 liveness_port=liveness_port).start(namespace)

    def make_volumes(self, tiny_model, claims=("models", "data")):
        if "models" in claims:
            shutil.copytree(tiny_model, self.cluster.create_local_volume(self.namespace, "models") / "tiny")
        if "data" in claims:
            self.data = self.cluster.create_local_volume(self.namespace, "data")
            write_datasets(self.data / "prompts", rows_per_dataset=200)

    def apply(self):
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, self.body)

    def get(self) -> dict:
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, self.name)

    def status(self) -> dict:
        return self.get().get("status") or {}

    def patch_spec(self, change):
        obj = self.get()
        change(obj["spec"])
        self.custom.replace_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, self.name, obj)

    def wait_phase(self, *phases, timeout_s=180):
        def reached():
            self.operator.check_alive()
            return self.status().get("phase") in phases
        wait_for(reached, timeout_s, f"phase {phases} (now {self.status().get('phase')})", self.cluster, interval_s=0.5)
        return self.status()

    def jobs(self) -> dict[str, client.V1Job]:
        return {j.metadata.name: j for j in self.batch.list_namespaced_job(
            self.namespace, label_selector=f"{names.LABEL_NAME}={self.name}").items}

    def pods(self, component="generate"):
        return self.core.list_namespaced_pod(
            self.namespace, label_selector=f"{names.LABEL_NAME}={self.name},{names.LABEL_COMPONENT}={component}").items

    def records(self) -> list[dict]:
        root = self.data / self.name
        return [r for f in record_files(str(root)) for r in iter_records(f)]

    def events(self) -> list[str]:
        return [e.reason for e in self.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={self.name}").items]

    def stop(self):
        self.operator.stop()


@pytest.fixture
def run(cluster, k8s, crd, namespace, tiny_model, tmp_path, request):
    runs = []

    def make(**kwargs) -> Run:
        r = Run(cluster, k8s, namespace, tiny_model, tmp_path, **kwargs)
        runs.append(r)
        return r

    yield make
    for r in runs:
        r.stop()
        if request.node.rep_call.failed:  # kept beside the control plane's logs
            LOGS_ON_FAILURE.mkdir(exist_ok=True)
            shutil.copy(r.operator.log, LOGS_ON_FAILURE / f"{request.node.name}-operator.log")


def http_ok(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.read().decode() if response.status == 200 else None
    except OSError:
        return None


def assert_records_match_status(r: Run, status: dict) -> None:
    records = r.records()
    ids = [rec["sample_id"] for rec in records]
    assert len(ids) == len(set(ids)), "a sample was written twice"
    by_dataset: dict[str, int] = {}
    for rec in records:
        assert rec["completion_tokens"] == len(rec["output_ids"])
        by_dataset[rec["dataset"]] = by_dataset.get(rec["dataset"], 0) + rec["completion_tokens"]
    for d in status["datasets"]:
        assert d["tokens"] == by_dataset.get(d["name"], 0), d  # the status counts exactly what was written


def test_quickstart_end_to_end_on_gpu_nodes(run):
    metrics_port, liveness_port = free_port(), free_port()
    r = run(extraction=True, metrics_port=metrics_port, liveness_port=liveness_port)
    r.apply()
    status = r.wait_phase("Generating")
    assert wait_for(lambda: http_ok(f"http://127.0.0.1:{liveness_port}/healthz"), 30, "the liveness endpoint")
    pods = r.pods()
    assert len(pods) == 2 and len({p.spec.node_name for p in pods}) == 2  # one replica per GPU node
    pod = pods[0].spec
    assert pod.node_name.startswith("gpu-node-") and pod.service_account_name == "qs-runner"
    sidecar = pod.init_containers[0]
    assert sidecar.restart_policy == "Always" and sidecar.startup_probe.http_get.path == "/ready"
    assert sidecar.resources.limits["nvidia.com/gpu"] == "8"
    assert any(v.empty_dir and v.empty_dir.medium == "Memory" for v in pod.volumes)
    assert any(t.key == "nvidia.com/gpu" for t in pod.tolerations)
    assert status["capacity"]["tokens"] == 7000 and status["capacity"]["hiddenStateBytes"] > 0

    status = r.wait_phase("Succeeded", "Failed", timeout_s=240)
    assert status["phase"] == "Succeeded", status["conditions"]
    assert all(d["state"] == "BudgetMet" and d["tokens"] >= d["budgetTokens"] for d in status["datasets"])
    assert all(1 <= d["skipped"] <= 3 for d in status["datasets"] if d["name"] in ("chat", "tools"))  # bad rows
    assert_records_match_status(r, status)
    assert {"BudgetsMet", "MergeSucceeded", "Succeeded"} <= set(r.events())
    assert not [n for n in r.jobs() if "-gen-" in n], "generation Jobs must be gone"
    assert not r.pods("generate")
    manifest = json.loads((r.data / "qs" / "corpus" / "manifest.json").read_text())
    assert sum(d["input_records"] for d in manifest["datasets"].values()) == len(r.records())
    assert json.loads((r.data / "qs" / "hidden-states" / "index.json").read_text())
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["status"] == "True" and conditions["Succeeded"]["status"] == "True"
    assert status["observedGeneration"] == r.get()["metadata"]["generation"]
    metrics = http_ok(f"http://127.0.0.1:{metrics_port}/metrics")
    chat = next(d for d in status["datasets"] if d["name"] == "chat")
    assert f'draftgen_dataset_tokens{{dataset="chat",name="qs",namespace="{r.namespace}"}} {float(chat["tokens"])}' in metrics
    assert f'draftgen_phase{{name="qs",namespace="{r.namespace}",phase="Succeeded"}} 1.0' in metrics


def test_operator_killed_and_restarted_mid_run_duplicates_nothing(run):
    r = run(budgets=(6000, 3000, 3000))
    r.apply()
    wait_for(lambda: r.status().get("tokens", 0) > 0, 120, "tokens in status", r.cluster)
    uids = {n: j.metadata.uid for n, j in r.jobs().items()}
    r.operator.kill()
    r.operator.start(r.namespace)
    status = r.wait_phase("Succeeded", "Failed", timeout_s=240)
    assert status["phase"] == "Succeeded", status["conditions"]
    log = r.operator.log.read_text()
    for name in uids:  # the restarted operator adopted the Jobs it found instead of creating them again
        assert log.count(f"created Job {r.namespace}/{name}") == 1, name
    assert_records_match_status(r, status)


def test_suspend_deletes_jobs_and_resume_continues_from_the_output(run):
    r = run(budgets=(8000, 2000, 2000))
    r.apply()
    wait_for(lambda: r.status().get("tokens", 0) > 1000, 120, "some tokens", r.cluster)
    r.patch_spec(lambda spec: spec.update(suspend=True))
    status = r.wait_phase("Suspended")
    wait_for(lambda: not r.jobs() and not r.pods(), 60, "Jobs and pods gone", r.cluster)
    kept = len(r.records())
    assert kept > 0 and {c["type"]: c["status"] for c in status["conditions"]}["Suspended"] == "True"
    r.patch_spec(lambda spec: spec.update(suspend=False))
    status = r.wait_phase("Succeeded", "Failed", timeout_s=240)
    assert status["phase"] == "Succeeded", status["conditions"]
    assert len(r.records()) >= kept
    assert_records_match_status(r, status)


def test_raising_a_budget_after_it_was_met_reopens_the_dataset(run):
    r = run()
    r.apply()
    r.wait_phase("Succeeded", timeout_s=240)
    r.patch_spec(lambda spec: spec["datasets"][0].update(budgetTokens=7000))
    wait_for(lambda: r.status().get("stage") == "Generating", 30, "generation to reopen", r.cluster)
    status = r.wait_phase("Succeeded", "Failed", timeout_s=240)
    assert status["phase"] == "Succeeded", status["conditions"]
    chat = next(d for d in status["datasets"] if d["name"] == "chat")
    assert chat["tokens"] >= 7000 and chat["state"] == "BudgetMet"
    assert "Reopened" in r.events()
    assert_records_match_status(r, status)
    manifest = json.loads((r.data / "qs" / "corpus" / "manifest.json").read_text())
    assert manifest["datasets"]["chat"]["input_records"] == chat["samples"]  # the merge ran again


def test_deleting_removes_children_but_never_the_data(run):
    r = run()
    r.apply()
    r.wait_phase("Generating")
    r.custom.delete_namespaced_custom_object(GROUP, VERSION, r.namespace, PLURAL, r.name)

    def children_gone():
        rbac = client.RbacAuthorizationV1Api(r.core.api_client)
        return not (r.jobs() or r.pods()
                    or r.core.list_namespaced_config_map(r.namespace, label_selector=f"{names.LABEL_NAME}=qs").items
                    or rbac.list_namespaced_role(r.namespace, label_selector=f"{names.LABEL_NAME}=qs").items)

    wait_for(children_gone, 90, "children garbage-collected", r.cluster)
    assert r.core.read_namespaced_persistent_volume_claim("data", r.namespace)
    assert (r.data / "prompts" / "chat.jsonl").exists()


def test_missing_volume_is_a_condition_then_resolves(run, tiny_model):
    r = run(volumes=False)
    r.make_volumes(tiny_model, claims=("models",))
    r.apply()

    def volume_condition():
        c = {c["type"]: c for c in r.status().get("conditions", [])}.get("Ready")
        return c if c and c["reason"] == "VolumeMissing" else None

    ready = wait_for(volume_condition, 30, "the VolumeMissing condition", r.cluster)
    assert "PersistentVolumeClaim data not found" in ready["message"] and ready["status"] == "False"
    assert r.status()["phase"] == "Pending" and not r.jobs()
    r.make_volumes(tiny_model, claims=("data",))
    r.wait_phase("Generating", "Succeeded", timeout_s=120)


def test_unreadable_model_path_fails_fast_with_a_clear_reason(run):
    r = run()
    r.body["spec"]["model"]["path"] = "no-such-model"
    r.apply()
    status = r.wait_phase("Failed", timeout_s=120)
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert failed["status"] == "True" and failed["reason"] == "GenerationJobFailed"
    assert "no-such-model" in failed["message"] and "no such directory" in failed["message"]
