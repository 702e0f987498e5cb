"""What goes wrong after admission is said on the DatasetGeneration itself (a condition with the API
server's, the scheduler's or the kubelet's own words, and an event), on the real control plane."""

from __future__ import annotations

import copy

from kubernetes import client

from draftgen_contracts import names
from jobrunner.output import iter_records, record_files
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
    r.body["spec"]["server"]["resources"] = {"requests": {"cpu": "lots"}}  # free-form: only the Job is checked
    r.apply()
    r.wait_phase("Failed")
    failed = condition_is(r, "Failed", "ChildInvalid", "create Job qs-gen-r000", "HTTP 400", "quantities must match")
    assert failed["status"] == "True"
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
    blocked = condition_is(r, "Blocked", "QuotaExceeded", "create Job qs-gen-r000", "HTTP 403", "trying again in")
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
