"""The operator on the real control plane, with the real `jobrunner generate` running in the generation
pods (the local kubelet) against the SGLang simulator as their sidecar: real tokens, real budgets."""

from __future__ import annotations

import base64
import json
import subprocess
import time
import urllib.request

import pytest
from kubernetes import client

from draftgen_contracts import names
from draftgen_contracts.progress import parse_progress
from draftgen_dev.cluster.controlplane import free_port
from draftgen_dev.demo_assets import write_datasets
from draftgen_operator.lease import Timing
from draftgen_simulator.config import SIM_VERSION
from tests.argocd.health import argocd_health
from tests.conftest import REPO, wait_for
from tests.operator.conftest import Operator
from tests.scenarios import check_records_match_status


def http_ok(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.read().decode() if response.status == 200 else None
    except OSError:
        return None


def documented_metrics(section: str) -> list[tuple[str, str]]:
    """(name, type) of each metric in docs/metrics.md's table under the heading that starts with `section`."""
    text = (REPO / "docs" / "metrics.md").read_text()
    table = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in table.splitlines() if line.startswith("| `draftgen_")]
    return [(row[1].strip().strip("`"), row[2].strip()) for row in rows]


def assert_documented_metrics_exist(section: str, scrape: str) -> None:
    documented = documented_metrics(section)
    assert len(documented) >= 8
    # A counter's TYPE line names it with or without `_total`, depending on how it is made.
    missing = [(n, t) for n, t in documented
               if f"# TYPE {n} {t}" not in scrape and f"# TYPE {n.removesuffix('_total')} {t}" not in scrape]
    assert not missing, f"documented in docs/metrics.md but not served: {missing}"


# The server container's context a namespace enforcing Pod Security restricted admits (the
# simulator runs as any user; SGLang's image would need one it can run as: docs/security.md#the-pods).
RESTRICTED_SERVER = {"runAsNonRoot": True, "runAsUser": 65532, "allowPrivilegeEscalation": False,
                     "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


def test_quickstart_end_to_end_on_gpu_nodes_under_pod_security_restricted(run, k8s, draftgen_image, cluster):
    """The quickstart as on a real cluster: the operator and every pod run from draftgen's image, built
    from the Dockerfile (the local kubelet runs a container from a loaded image's root as its user)."""
    metrics_port, liveness_port = free_port(), free_port()
    r = run(extraction=True, metrics_port=metrics_port, liveness_port=liveness_port, image=draftgen_image)
    client.CoreV1Api(k8s).patch_namespace(r.namespace, {"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}})
    r.body["spec"]["server"]["securityContext"] = RESTRICTED_SERVER
    r.body["spec"]["imagePullSecrets"] = [{"name": "registry-mirror"}]  # a private registry: on every pod
    with_cluster_settings(r)
    try:
        r.apply()
        check_the_quickstart(r, k8s, cluster, draftgen_image, metrics_port, liveness_port)
    finally:
        client.SchedulingV1Api(k8s).delete_priority_class(f"{r.namespace}-batch")


# A GPU cluster's pod settings (docs/pods.md), each found on the pods by check_pod_settings.
def with_cluster_settings(r) -> None:
    client.SchedulingV1Api(r.core.api_client).create_priority_class(
        {"metadata": {"name": f"{r.namespace}-batch"}, "value": 1000})
    r.core.create_namespaced_config_map(r.namespace, {"metadata": {"name": "nccl"}, "data": {"level": "WARN"}})
    spec = r.body["spec"]
    spec["pods"] = {"annotations": {"cost-center": "ml-42"}, "labels": {"team": "drafters"},
                    "priorityClassName": f"{r.namespace}-batch", "volumes": [{"name": "cache", "emptyDir": {}}]}
    spec["cpuStages"] = {"nodeSelector": {"kubernetes.io/hostname": "cpu-node-0"}}
    spec["preflight"] = {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
    spec["server"].update(
        env=[{"name": "NCCL_DEBUG", "valueFrom": {"configMapKeyRef": {"name": "nccl", "key": "level"}}}],
        volumeMounts=[{"name": "cache", "mountPath": "/cache"}], generateResources={"requests": {"cpu": 1}},
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "Exists"}]}]}}})


def check_pod_settings(r, pods: list) -> None:
    """Every pod of the run carries the spec's pod settings, each where docs/pods.md says."""
    for pod in pods:
        component = pod.metadata.labels[names.LABEL_COMPONENT]
        assert pod.metadata.annotations["cost-center"] == "ml-42" and pod.metadata.labels["team"] == "drafters"
        assert pod.spec.priority_class_name == f"{r.namespace}-batch" and pod.spec.priority == 1000, component
        gpu = component == "generate" or (component == "extract" and r.body["spec"]["extraction"].get("gpus", 8))
        assert (pod.spec.node_name == "cpu-node-0") == (not gpu), (component, pod.spec.node_name)
        containers = {c.name: c for c in [*(pod.spec.init_containers or []), *pod.spec.containers]}
        for name in {"generate": ["sglang"], "extract": ["extract"]}.get(component, []):
            assert ("/cache", "cache") in {(m.mount_path, m.name) for m in containers[name].volume_mounts}
            assert any(e.name == "NCCL_DEBUG" and e.value_from.config_map_key_ref.name == "nccl"
                       for e in containers[name].env)
        assert ("cache" in {v.name for v in pod.spec.volumes}) == (component in ("generate", "extract")), component
    resources = {p.metadata.labels[names.LABEL_COMPONENT]: p.spec.containers[0].resources.requests for p in pods}
    assert resources["preflight"] == {"cpu": "500m", "memory": "1Gi"} and resources["generate"] == {"cpu": "1"}


def check_the_quickstart(r, k8s, cluster, draftgen_image, metrics_port, liveness_port) -> None:
    status = r.wait_phase("Generating")
    assert argocd_health(r.get())[0] == "Progressing"
    assert wait_for(lambda: http_ok(f"http://127.0.0.1:{liveness_port}/healthz"), 30, "the liveness endpoint")
    pods = r.pods()
    # Every documented metric of `jobrunner generate`, scraped from a generation pod while it runs.
    sample = 'draftgen_generate_completion_tokens_total{dataset="chat",name="qs",replica='

    def scraped():  # served from the first report on (the families exist before it, without samples)
        text = http_ok(f"http://{pods[0].status.pod_ip}:{names.GENERATE_METRICS_PORT}/metrics")
        return text if text and sample in text else None
    scrape = wait_for(scraped, 60, "a generation pod's metrics with its first report")
    assert_documented_metrics_exist("`jobrunner generate`", scrape)
    assert len(pods) == 2 and len({p.spec.node_name for p in pods}) == 2  # one replica per GPU node
    pod = pods[0].spec
    assert pod.node_name.startswith("gpu-node-") and pod.service_account_name == "qs-runner"
    sidecar = pod.init_containers[0]
    assert sidecar.restart_policy == "Always" and sidecar.startup_probe.http_get.path == "/ready"
    assert sidecar.resources.limits["nvidia.com/gpu"] == "8"
    assert any(v.empty_dir and v.empty_dir.medium == "Memory" for v in pod.volumes)
    assert any(t.key == "nvidia.com/gpu" for t in pod.tolerations)
    assert pod.containers[0].security_context.read_only_root_filesystem  # admitted as restricted
    # The run's server keys: a Secret it owns, whose values appear in no pod spec, status or event.
    secret = r.core.read_namespaced_secret(names.keys_secret_name("qs"), r.namespace)
    assert [o.kind for o in secret.metadata.owner_references] == ["DatasetGeneration"]
    keys = [base64.b64decode(secret.data[k]).decode() for k in (names.API_KEY_SECRET_KEY, names.ADMIN_API_KEY_SECRET_KEY)]
    assert all(len(k) >= 40 for k in keys) and keys[0] != keys[1]
    seen = r.kubectl("get", "pods,jobs,configmaps,dsgen,events", "-o", "yaml")
    assert not [k for k in keys if k in seen], "a server key is readable outside its Secret"
    # Its NetworkPolicy, owned by it too, selects exactly its generation pods and admits nobody.
    policy = client.NetworkingV1Api(r.core.api_client).read_namespaced_network_policy(
        names.network_policy_name("qs"), r.namespace)
    assert [o.kind for o in policy.metadata.owner_references] == ["DatasetGeneration"] and not policy.spec.ingress
    selector = ",".join(f"{k}={v}" for k, v in policy.spec.pod_selector.match_labels.items())
    assert {p.metadata.name for p in r.core.list_namespaced_pod(r.namespace, label_selector=selector).items} == \
        {p.metadata.name for p in pods}
    # The preflight's findings, published by its pod and folded by the operator; the estimate uses
    # the tiny model's own hidden size, and shows in `kubectl get -o wide`.
    estimate, preflight = status["estimate"], status["preflight"]
    assert estimate["responseTokens"] >= 7000 and estimate["promptTokens"] > 0  # a budget, or what a met one kept
    assert estimate["corpusTokens"] == estimate["responseTokens"] + estimate["promptTokens"]
    assert preflight["model"]["hiddenSize"] == 64 and "hidden size 64" in estimate["assumptions"]
    columns = r.kubectl("get", "dsgen", r.name, "-o", "wide").splitlines()[0].split()
    assert columns[-4:] == ["ENDS", "CORPUS", "STATES", "DISK"], columns
    chat = next(d for d in preflight["datasets"] if d["name"] == "chat")
    assert chat["usableRows"] == chat["rows"] - 3 and chat["skippedByReason"]["bad_json"] == 1

    status = r.wait_phase("Succeeded", "Failed", timeout_s=240)
    assert status["phase"] == "Succeeded", status["conditions"]
    # Every pod the run made (the generation pods while they ran, the others kept with their Jobs) pulls
    # with the spec's secret.
    kept = r.core.list_namespaced_pod(r.namespace, label_selector=f"{names.LABEL_NAME}={r.name}").items
    assert {p.metadata.labels[names.LABEL_COMPONENT] for p in kept} >= {"preflight", "merge", "extract"}
    assert all([s.name for s in p.spec.image_pull_secrets or []] == ["registry-mirror"] for p in [*kept, *pods])
    check_pod_settings(r, [*kept, *pods])
    # Cutting at the budget (the default), two replicas end every dataset at its budget exactly.
    assert all(d["state"] == "BudgetMet" and d["tokens"] == d["budgetTokens"] for d in status["datasets"]), \
        status["datasets"]
    # Bad rows are skipped and counted (the first of each file is among the first rows read).
    assert all(1 <= d["skipped"] <= 3 for d in status["datasets"] if d["name"] in ("chat", "tools")), [
        (d["name"], d["skipped"]) for d in status["datasets"]]
    check_records_match_status(status, r.records())
    assert {"BudgetsMet", "MergeSucceeded", "Succeeded"} <= set(r.events())
    assert not [n for n in r.jobs() if "-gen-" in n], "generation Jobs must be gone"
    assert not r.pods("generate")
    manifest = json.loads((r.data / "qs" / "corpus" / "manifest.json").read_text())
    assert sum(d["input_records"] for d in manifest["datasets"].values()) == len(r.records())
    # The estimate, refreshed from the measured lengths, against what extraction wrote.
    index = json.loads((r.data / "qs" / "hidden-states" / "index.json").read_text())
    assert abs(status["estimate"]["hiddenStateBytes"] / index["bytes"] - 1) <= 0.10, (status["estimate"], index["bytes"])
    # The extraction pod published its progress (its token may patch its own report, in a namespace
    # enforcing restricted): its last report is the index's, and its measured rate is the estimate's.
    extraction = status["extraction"]
    assert extraction["finished"] and extraction["tokens"] == index["tokens"], extraction
    assert extraction["samples"] == len(index["samples"]) and extraction["tokensPerSecond"] > 0
    assert status["estimate"]["extractionRateBasis"] == "measured"
    assert status["estimate"]["extractionTokensPerSecond"] == extraction["tokensPerSecond"]
    # What made them, from the generation pods' sessions (each asked its sidecar's /server_info).
    sessions = manifest["provenance"]["sessions"]
    assert sorted(s["replica"] for s in sessions) == [0, 1] and manifest["provenance"]["differs"] == []
    assert all(s["server_version"] == SIM_VERSION and s["model"]["config.json"] for s in sessions)
    assert index["provenance"]["model_matches_generation"] is True
    assert {p.name for p in (r.data / "qs" / "corpus" / "exports").iterdir()} == {"hf-parquet", "speculators-jsonl"}
    assert (r.data / "qs" / "hidden-states" / "exports" / "specforge" / "train" / "sample_ids.json").exists()
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["status"] == "True" and conditions["Succeeded"]["status"] == "True"
    assert status["observedGeneration"] == r.get()["metadata"]["generation"]
    assert argocd_health(r.get()) == ("Healthy", "Succeeded: " + conditions["Ready"]["message"])
    metrics = http_ok(f"http://127.0.0.1:{metrics_port}/metrics")
    assert_documented_metrics_exist("The operator", metrics)
    chat = next(d for d in status["datasets"] if d["name"] == "chat")
    assert f'draftgen_dataset_tokens{{dataset="chat",name="qs",namespace="{r.namespace}"}} {float(chat["tokens"])}' in metrics
    assert f'draftgen_phase{{name="qs",namespace="{r.namespace}",phase="Succeeded"}} 1.0' in metrics
    # Every container of every pod of the run ran from the image.
    log = (cluster.logs_dir / "local-kubelet.log").read_text().splitlines()
    started = [line for line in log if f"pod {r.namespace}/" in line and ": started " in line]
    assert started and all(line.endswith(f"from the image {draftgen_image.ref}") for line in started), started


def gpu_pods(r) -> list[str]:
    """The namespace's pods that ask for a GPU."""
    return [p.metadata.name for p in r.core.list_namespaced_pod(r.namespace).items
            if any("nvidia.com/gpu" in str((c.resources and c.resources.limits) or {})
                   for c in [*(p.spec.init_containers or []), *p.spec.containers])]


def test_created_suspended_a_run_shows_its_plan_with_no_gpu_pod_and_suspend_and_resume_keep_its_data(run):
    r = run(budgets=(8000, 2000, 2000), suspend=True)
    r.apply()
    wait_for(lambda: r.status().get("stage") == "Generating", 120, "the preflight passed", r.cluster)
    status = r.status()
    assert status["phase"] == "Suspended" and status["preflight"]["datasets"], status
    assert status["estimate"]["generatedTokens"] == 12000 and status["estimate"]["gpuHours"] >= 0
    time.sleep(3)  # a few folds more: still nothing takes a GPU
    assert not gpu_pods(r) and not [n for n in r.jobs() if "-gen-" in n]
    preflight = r.jobs()[names.preflight_job_name(r.name)].metadata.uid
    r.patch_spec(lambda spec: spec.update(suspend=False))
    wait_for(lambda: (r.status().get("tokens") or 0) > 1000, 120, "some tokens", r.cluster)
    assert r.jobs()[names.preflight_job_name(r.name)].metadata.uid == preflight  # what passed is not run again
    r.patch_spec(lambda spec: spec.update(suspend=True))
    status = r.wait_phase("Suspended")
    assert argocd_health(r.get())[0] == "Suspended"  # docs/gitops.md
    wait_for(lambda: not r.unfinished_jobs() and not r.pods(), 60, "Jobs and pods gone", r.cluster)
    kept = len(r.records())
    assert kept > 0 and {c["type"]: c["status"] for c in status["conditions"]}["Suspended"] == "True"
    r.patch_spec(lambda spec: spec.update(suspend=False))
    status = r.wait_phase("Succeeded", "Failed", timeout_s=240)
    assert status["phase"] == "Succeeded", status["conditions"]
    assert len(r.records()) >= kept
    check_records_match_status(status, r.records())


def dataset_tokens(status: dict) -> dict[str, int]:
    """The tokens the status says per dataset; a dataset no replica reported yet says none."""
    return {d["name"]: d["tokens"] for d in status.get("datasets") or [] if d.get("tokens") is not None}


def test_deleting_removes_children_but_never_the_data_and_a_re_created_run_never_counts_less(run):
    r = run(budgets=(6000, 4000, 4000))
    r.apply()
    wait_for(lambda: sum(dataset_tokens(r.status()).values()) > 0, 120, "the first tokens", r.cluster)
    said = dataset_tokens(r.status())  # the last the deleted object said
    r.custom.delete_namespaced_custom_object(names.GROUP, names.VERSION, r.namespace, names.PLURAL, r.name)

    def children_gone():
        rbac = client.RbacAuthorizationV1Api(r.core.api_client)
        return not (r.jobs() or r.pods()
                    or r.core.list_namespaced_config_map(
                        r.namespace, label_selector=f"{names.LABEL_NAME}=qs,!{names.LABEL_OUTPUT_LOCK}").items
                    or rbac.list_namespaced_role(r.namespace, label_selector=f"{names.LABEL_NAME}=qs").items)

    wait_for(children_gone, 90, "children garbage-collected", r.cluster)
    assert r.core.read_namespaced_persistent_volume_claim("data", r.namespace)
    assert (r.data / "prompts" / "chat.jsonl").exists()
    # The output folder's lock stays with the data (docs/operator.md#one-run-per-output-folder).
    [lock] = r.core.list_namespaced_config_map(r.namespace, label_selector=f"{names.LABEL_OUTPUT_LOCK}=true").items
    assert lock.data["owner"] == "qs"

    # Created again: it resumes from the data, and no status of it counts less than the deleted one said.
    r.apply()
    seen = []

    def finished():
        status = r.status()
        seen.append(dataset_tokens(status))
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    status = wait_for(finished, 240, "the re-created run to finish", r.cluster, interval_s=0.2)
    assert status["phase"] == "Succeeded", status
    assert any(seen) and all(tokens[name] >= said[name] for tokens in seen for name in said if name in tokens), \
        (said, seen)
    check_records_match_status(status, r.records())


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


def test_a_volume_that_fills_during_extraction_is_said_on_the_object_and_the_run_resumes_once_it_has_room(
        run, tiny_model):
    """The data claim's folder is a 3 MB tmpfs: the generation and the corpus fit, the states do not."""
    r = run(volumes=False, extraction=True, operator_env={"DRAFTGEN_VOLUME_FULL_RETRY": "3"})
    r.make_volumes(tiny_model, claims=("models",))
    r.data = r.cluster.create_local_volume(r.namespace, "data")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(r.data)], check=True)
    try:
        write_datasets(r.data / "prompts", rows_per_dataset=200)
        r.apply()

        def volume_full():
            c = {c["type"]: c for c in r.status().get("conditions", [])}.get("Ready")
            return c if c and c["reason"] == "VolumeFull" else None
        ready = wait_for(volume_full, 240, "the VolumeFull condition", r.cluster)
        assert "the output volume (PersistentVolumeClaim data) is full: Job qs-extract stopped" in ready["message"]
        assert "volume full at /data/qs/hidden-states" in ready["message"] and "more room" in ready["message"]
        assert r.status()["phase"] == "Extracting" and "VolumeFull" in r.events()
        subprocess.run(["mount", "-o", "remount,size=64m", str(r.data)], check=True)
        status = r.wait_phase("Succeeded", "Failed", timeout_s=180)
        assert status["phase"] == "Succeeded", status["conditions"]
        index = json.loads((r.data / "qs" / "hidden-states" / "index.json").read_text())
        assert index["complete"] and status["extraction"]["finished"]
    finally:
        r.stop()
        subprocess.run(["umount", "--lazy", str(r.data)], check=True)


# Seconds from the reports that meet every budget to no generation pod running, with no operator: a
# report a second, the peers read a second later, the stop and the pod's end (docs/operator.md#an-operator-outage).
FREED_WITHIN_S = 20


def reports_met(r) -> bool:
    """Every dataset's budget met by the replicas' own reports (the report ConfigMaps, no operator's fold)."""
    docs = [parse_progress((r.core.read_namespaced_config_map(names.report_name(r.name, i), r.namespace).data or {})
                           .get(names.REPORT_KEY)) for i in range(2)]
    if any(d is None for d in docs):
        return False
    budgets = {d["name"]: d["budgetTokens"] for d in r.body["spec"]["datasets"]}
    return all(sum(d.datasets[n].completion_tokens for d in docs if n in d.datasets) >= b for n, b in budgets.items())


def test_with_the_operator_gone_the_replicas_end_every_budget_and_free_their_gpus_then_it_succeeds_exact(run):
    r = run(budgets=(6000, 4000, 4000))
    r.apply()
    r.wait_phase("Generating")
    wait_for(lambda: (r.status().get("tokens") or 0) >= 1500, 120, "the first 10 % of the tokens", r.cluster)
    r.operator.kill()
    met = wait_for(lambda: reports_met(r) and time.monotonic(), 180, "every budget met by the reports", r.cluster)
    running = lambda: [p.metadata.name for p in r.pods() if p.status.phase in ("Pending", "Running")]  # noqa: E731
    wait_for(lambda: not running(), FREED_WITHIN_S + 30, "the generation pods gone", r.cluster)
    freed_s = time.monotonic() - met
    assert freed_s <= FREED_WITHIN_S, freed_s
    wait_for(lambda: all(j.status.succeeded for n, j in r.jobs().items() if "-gen-" in n), 30,
             "each generation Job Complete by itself", r.cluster)

    r.operator.start(r.namespace)
    status = r.wait_phase("Succeeded", "Failed", timeout_s=180)
    assert status["phase"] == "Succeeded", status["conditions"]
    assert all(d["tokens"] == d["budgetTokens"] for d in status["datasets"]), status["datasets"]  # exact, cut at it
    check_records_match_status(status, r.records())


# Leader election with short timings (the chart's are 15/10/2 s): a crashed leader's Lease is taken
# within its duration plus two retry periods (docs/operator.md#two-replicas-and-a-failover).
LEASE = Timing(duration_s=6.0, renew_deadline_s=4.0, retry_s=1.0)
TAKEOVER_WITHIN_S = LEASE.duration_s + 2 * LEASE.retry_s


def lease_args(namespace: str) -> tuple[str, ...]:
    return ("--leader-election", "--lease-namespace", namespace, "--lease-duration", str(LEASE.duration_s),
            "--renew-deadline", str(LEASE.renew_deadline_s), "--retry-period", str(LEASE.retry_s))


def leading(operator: Operator) -> bool:
    return "leading" in operator.log.read_text()


def test_two_operators_one_leads_and_when_it_is_killed_the_standby_takes_over_and_the_run_ends_exact(
        run, namespace, tmp_path):
    run_through_failovers(run(budgets=(6000, 4000, 4000), operator_args=lease_args(namespace)), tmp_path,
                          stops=["kill"])


@pytest.mark.slow
def test_the_leader_killed_or_stopped_again_and_again_loses_and_doubles_nothing(run, namespace, tmp_path):
    """Four handovers in one run, crashes and clean stops (a clean stop hands the Lease over at once)."""
    run_through_failovers(run(budgets=(24000, 16000, 16000), operator_args=lease_args(namespace)), tmp_path,
                          stops=["kill", "terminate", "kill", "terminate"])


def run_through_failovers(r, tmp_path, stops: list[str]) -> None:
    """Two operators on `r`; at each 1/(len(stops) + 1) of the tokens the leader is stopped (`kill`:
    SIGKILL, `terminate`: SIGTERM) and started again as the standby; the other must lead within the
    bound, and the run end exact."""
    wait_for(lambda: leading(r.operator), 30, "the first operator leading", r.cluster)
    (tmp_path / "b").mkdir()
    operators = [r.operator, Operator(r.cluster, tmp_path / "b", args=r.operator.args).start(r.namespace)]
    total = sum(d["budgetTokens"] for d in r.body["spec"]["datasets"])
    try:
        r.apply()
        r.wait_phase("Generating")
        for i, stop in enumerate(stops):
            leader, standby = operators
            at = total * (i + 1) // (len(stops) + 1)
            wait_for(lambda: (r.status().get("tokens") or 0) >= at, 180, f"{at} tokens", r.cluster)
            assert not leading(standby), standby.log.read_text()[-2000:]
            leader.kill() if stop == "kill" else leader.stop()  # kill: no release, the standby waits the Lease out
            stopped = time.monotonic()
            wait_for(lambda: leading(standby), TAKEOVER_WITHIN_S + 30, "the standby leading", r.cluster)
            took_s = time.monotonic() - stopped
            assert took_s <= (TAKEOVER_WITHIN_S if stop == "kill" else 2 * LEASE.retry_s + 1), (stop, took_s)
            leader.log.write_text("")  # its next life starts as a standby, and `leading` reads its log
            operators = [standby, leader.start(r.namespace)]
            r.operator = standby  # what wait_phase checks is alive
        status = r.wait_phase("Succeeded", "Failed", timeout_s=240)
        assert status["phase"] == "Succeeded", status["conditions"]
        assert all(d["tokens"] == d["budgetTokens"] for d in status["datasets"]), status["datasets"]
        check_records_match_status(status, r.records())
    finally:
        for operator in operators:
            operator.stop()
