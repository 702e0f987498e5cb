"""The real API server refuses invalid DatasetGenerations at admission, naming the field."""

from __future__ import annotations

import copy

import pytest
from kubernetes import client

from draftgen import crd as crd_module
from tests.conftest import REPO
from tests.manifests import INVALID, VALID, manifest, with_absolute_dataset_paths


@pytest.fixture(scope="module")
def namespace(module_namespace):
    """One namespace for the module: its objects are refused, dry-run or named apart."""
    return module_namespace


def create(k8s, namespace, body):
    return client.CustomObjectsApi(k8s).create_namespaced_custom_object(
        "draftgen.io", "v1alpha1", namespace, "datasetgenerations", body, field_validation="Strict")


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_manifest_is_refused_naming_the_field(k8s, crd, namespace, case):
    body, field = INVALID[case]
    with pytest.raises(client.ApiException) as err:
        create(k8s, namespace, body)
    assert err.value.status in (400, 422), err.value.body
    assert field in err.value.body, err.value.body


@pytest.mark.parametrize("case", list(VALID))
def test_manifests_both_executors_accept_are_admitted(k8s, crd, namespace, case):
    client.CustomObjectsApi(k8s).create_namespaced_custom_object(
        "draftgen.io", "v1alpha1", namespace, "datasetgenerations", VALID[case], field_validation="Strict",
        dry_run="All")


def test_valid_manifest_is_accepted_with_defaults(k8s, crd, namespace):
    got = create(k8s, namespace, manifest())
    server = got["spec"]["server"]
    assert server["tensorParallelSize"] == 8 and server["gpusPerReplica"] == 8 and server["port"] == 30000
    assert got["spec"]["model"]["contextLength"] == 32768
    create(k8s, namespace, with_absolute_dataset_paths())


@pytest.mark.parametrize("path, value, field", [
    (("model", "path"), "other-model", "spec.model"),
    (("model", "tokenizer"), "other-tokenizer", "spec.model"),
    (("datasets", 0, "path"), "prompts/other.jsonl", "spec.datasets[0].path"),
    (("output", "claimName"), "other", "spec.output"),
    # Optional ones may not be added either (the parent's presence rule: a field's own self == oldSelf
    # is evaluated only when the field is in both objects).
    (("inputs",), {"claimName": "library"}, "spec.inputs"),
    (("datasets", 0, "fields"), {"prompt": "problem"}, "spec.datasets[0].fields"),
    (("datasets", 0, "chatTemplate"), {"enableThinking": True}, "spec.datasets[0].chatTemplate"),
])
def test_fields_fixed_once_generation_started_are_immutable(k8s, crd, namespace, path, value, field):
    custom = client.CustomObjectsApi(k8s)
    name = f"imm-{len(path)}-{path[-1].lower()}"[:40]
    got = create(k8s, namespace, manifest(name))
    changed = copy.deepcopy(got)
    node = changed["spec"]
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    with pytest.raises(client.ApiException) as err:
        custom.replace_namespaced_custom_object("draftgen.io", "v1alpha1", namespace, "datasetgenerations", name, changed)
    assert err.value.status == 422 and field in err.value.body and "immutable" in err.value.body


def test_budget_can_change(k8s, crd, namespace):
    custom = client.CustomObjectsApi(k8s)
    got = create(k8s, namespace, manifest("raise"))
    got["spec"]["datasets"][0]["budgetTokens"] = 9000
    got["spec"]["suspend"] = True
    after = custom.replace_namespaced_custom_object("draftgen.io", "v1alpha1", namespace, "datasetgenerations",
                                                    "raise", got)
    assert after["spec"]["datasets"][0]["budgetTokens"] == 9000


def test_committed_crd_is_the_generated_one():
    committed = (REPO / "crds" / "datasetgenerations.draftgen.io.yaml").read_text()
    assert committed == crd_module.render(), "run: draftgen crd > crds/datasetgenerations.draftgen.io.yaml"


def test_the_plans_jobs_with_an_inputs_volume_and_trusted_code_are_valid_jobs(k8s, namespace):
    """The API server's own Job validation (dry run) of the preflight and generation Jobs with
    spec.inputs and model.trustRemoteCode: the inputs volume mounted read-only beside the others."""
    from draftgen import api, plan

    body = manifest(inputs={"claimName": "library"})
    body["spec"]["model"]["trustRemoteCode"] = True
    spec = api.DatasetGenerationSpec.model_validate(body["spec"])
    settings = plan.OperatorSettings(runner_image="jobrunner:test")
    config = plan.config_object("demo", namespace, spec, settings)
    batch = client.BatchV1Api(k8s)
    for job in (plan.preflight_job("demo", spec, settings, config),
                plan.generation_job("demo", spec, 0, settings, config)):
        batch.create_namespaced_job(namespace, job, dry_run="All", field_validation="Strict")
