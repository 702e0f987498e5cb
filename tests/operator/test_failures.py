"""What goes wrong after admission is said on the DatasetGeneration itself (a condition with the API
server's, the scheduler's or the kubelet's own words, and an event), on the real control plane."""

from __future__ import annotations

import copy

from kubernetes import client

from draftgen_contracts import names
from draftgen_dev.cluster.webhook import WEBHOOK_NAME, AdmissionWebhook
from jobrunner.shared.output import iter_records, record_files
from tests.argocd.health import argocd_health
from tests.conftest import wait_for
from tests.scenarios import check_records_match_status


def conditions(r) -> dict:
    return {c["type"]: c for c in r.status().get("conditions") or []}


def condition_is(r, type_: str, reason: str, *fragments: str) -> dict:
    """Until the object's condition `type_` has `reason` and says every fragment; that condition."""
    def said():
        r.operator.check_alive()
        c = conditions(r).get(type_)
        return c is not None and c["reason"] == reason and all(f in c["message"] for f in fragments)
    wait_for(said, 120, f"condition {type_} {reason} saying {fragments}", r.cluster, interval_s=0.5)
    return conditions(r)[type_]


def test_a_child_the_api_server_refuses_fails_the_object_with_its_message(run):
    r = run()
    # Each quantity is one, but a request above its limit: admission checks no such rule between two
    # fields of Kubernetes' own types, the API server does when the Job comes.
    r.body["spec"]["server"]["resources"] = {"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}
    r.apply()
    r.wait_phase("Failed")
    failed = condition_is(r, "Failed", "ChildInvalid", "create Job qs-gen-r000", "HTTP 422",
                          "must be less than or equal to cpu limit")
    assert failed["status"] == "True" and argocd_health(r.get()) == ("Degraded", failed["message"])
    assert "ChildInvalid" in r.events()


def test_pods_refused_by_pod_security_fail_the_object_quoting_the_admission(run, k8s):
    r = run()
    client.CoreV1Api(k8s).patch_namespace(r.namespace, {"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted"}}})
    r.apply()
    r.wait_phase("Failed")
    condition_is(r, "Failed", "PodsRefused", "violates PodSecurity", "restricted")
    assert "PodsRefused" in r.events()
    assert not r.pods()


def test_a_gpu_quota_for_one_replica_is_said_as_partial_capacity(run, k8s):
    r = run()
    client.CoreV1Api(k8s).create_namespaced_resource_quota(r.namespace, {
        "metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}})
    r.apply()
    capacity = condition_is(r, "Capacity", "PodsRefused", "1 of 2 generation replicas ready", "exceeded quota")
    assert capacity["status"] == "False" and r.status()["readyReplicas"] == 1
    assert "PodsRefused" in r.events()


def test_the_operators_own_writes_refused_for_a_while_heal_without_a_restart(run, k8s):
    core = client.CoreV1Api(k8s)
    r = run()
    core.create_namespaced_resource_quota(r.namespace, {"metadata": {"name": "no-jobs"},
                                                        "spec": {"hard": {"count/jobs.batch": "0"}}})
    r.apply()
    blocked = condition_is(r, "Blocked", "QuotaExceeded", "create Job qs-preflight", "HTTP 403", "trying again in")
    assert r.status().get("phase") != "Failed" and blocked["status"] == "True"
    core.delete_namespaced_resource_quota("no-jobs", r.namespace)
    r.wait_phase("Succeeded", timeout_s=240)
    assert conditions(r)["Blocked"]["status"] == "False"


def test_a_second_object_on_the_same_folder_runs_nothing_and_names_the_first(run):
    first = run(name="first", output={"claimName": "data", "path": "shared"})
    first.apply()
    wait_for(lambda: first.jobs(), 60, "the first object's Jobs", first.cluster)
    second = copy.deepcopy(first.body)
    second["metadata"]["name"] = "second"
    first.custom.create_namespaced_custom_object(names.GROUP, names.VERSION, first.namespace, names.PLURAL, second)
    read = lambda: first.custom.get_namespaced_custom_object(  # noqa: E731
        names.GROUP, names.VERSION, first.namespace, names.PLURAL, "second").get("status") or {}

    def says_in_use():
        ready = {c["type"]: c for c in read().get("conditions") or []}.get("Ready") or {}
        return ready.get("reason") == "OutputInUse" and "DatasetGeneration first" in ready["message"]
    wait_for(says_in_use, 60, "OutputInUse on the second object", first.cluster)
    first.wait_phase("Succeeded", timeout_s=240)
    jobs = client.BatchV1Api(first.batch.api_client).list_namespaced_job(
        first.namespace, label_selector=f"{names.LABEL_NAME}=second").items
    assert not jobs and read()["phase"] == "Pending"
    # The folder holds the first run's records alone, and they are what its status counts.
    records = [rec for f in record_files(str(first.data / "shared")) for rec in iter_records(f)]
    check_records_match_status(first.status(), records)
    events = [e.reason for e in first.core.list_namespaced_event(
        first.namespace, field_selector="involvedObject.name=second").items]
    assert "OutputInUse" in events


def test_pods_no_node_can_take_say_the_schedulers_words(run):
    r = run()
    r.body["spec"]["server"]["nodeSelector"] = {"draftgen.test/gpu-kind": "none-such"}
    r.apply()
    ready = condition_is(r, "Ready", "Unschedulable", "2 of 2 generation pods exist, 0 scheduled", "replica 0: Unschedulable",
                         "node(s) didn't match")
    assert ready["status"] == "False" and r.status()["phase"] == "Pending"
    assert "Unschedulable" in r.events()


def test_an_image_that_cannot_be_pulled_is_said_with_the_kubelets_words(run):
    r = run()
    r.body["spec"]["server"]["image"] = "registry.invalid/sglang:v0"  # never resolves (see the local kubelet)
    r.apply()

    def pull_said():
        r.operator.check_alive()
        ready = conditions(r).get("Ready") or {}
        return ready.get("reason") in ("ErrImagePull", "ImagePullBackOff") and "registry.invalid/sglang:v0" in ready["message"]
    wait_for(pull_said, 120, "the failed pull on the object", r.cluster, interval_s=0.5)
    assert "2 of 2 generation pods exist, 2 scheduled, 0 ready" in conditions(r)["Ready"]["message"]
    assert r.status()["phase"] == "Pending" and conditions(r)["Capacity"]["status"] == "False"
    assert {"ErrImagePull", "ImagePullBackOff"} & set(r.events())


def test_a_server_that_crashes_before_it_is_ready_is_said_with_its_exit_code(run):
    r = run()
    r.body["spec"]["server"]["args"] = [*r.body["spec"]["server"]["args"], "--no-such-flag"]
    r.apply()
    ready = condition_is(r, "Ready", "CrashLoopBackOff", "0 ready", "container sglang: back-off",
                         "last exit code 2")
    assert ready["status"] == "False" and r.status()["phase"] == "Pending"
    assert "CrashLoopBackOff" in r.events()


def webhook_in_force(r, code: int) -> None:
    """Until the API server answers a Job creation in the namespace with `code` (its webhook
    configuration reaches the API server's informer a moment after it is written)."""
    probe = {"metadata": {"name": "probe"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}

    def answered():
        try:
            r.batch.create_namespaced_job(r.namespace, probe, dry_run="All")
        except client.ApiException as e:
            return e.status == code
        return code == 201
    wait_for(answered, 30, f"the webhook answering {code}", r.cluster, interval_s=0.3)


def test_a_webhooks_denial_fails_the_object_with_the_webhooks_words(run):
    r = run()
    with AdmissionWebhook(r.cluster, r.namespace) as hook:
        hook.deny(403, "Jobs in this namespace need a cost-center label")
        webhook_in_force(r, 403)
        r.apply()
        r.wait_phase("Failed")
        failed = condition_is(r, "Failed", "AdmissionDenied", "create Job qs-preflight", "HTTP 403",
                              f'admission webhook "{WEBHOOK_NAME}" denied the request: '
                              "Jobs in this namespace need a cost-center label")
    assert failed["status"] == "True" and "AdmissionDenied" in r.events() and not r.jobs()


def test_a_webhook_down_throttling_or_in_conflict_blocks_the_run_until_it_answers(run):
    r = run()
    with AdmissionWebhook(r.cluster, r.namespace) as hook:
        hook.stop_serving()  # failurePolicy Fail: the API server cannot create a Job without its answer
        webhook_in_force(r, 500)
        r.apply()
        condition_is(r, "Blocked", "ApiUnavailable", "create Job qs-preflight", "HTTP 500", "failed calling webhook")
        hook.deny(429, "too many Jobs created this minute")
        hook.start()
        condition_is(r, "Blocked", "Throttled", "HTTP 429", "too many Jobs created this minute", "trying again in")
        hook.deny(409, "a migration holds this namespace")
        condition_is(r, "Blocked", "Conflict", "HTTP 409", "a migration holds this namespace")
        assert r.status().get("phase") == "Pending" and not r.jobs()
        hook.allow()
        r.wait_phase("Succeeded", timeout_s=300)
    assert conditions(r)["Blocked"]["status"] == "False"
    assert {"ApiUnavailable", "Throttled", "Conflict"} <= set(r.events())
    check_records_match_status(r.status(), r.records())
