"""The real API server refuses invalid DatasetGenerations at admission, naming the field."""

from __future__ import annotations

import copy

import pytest
from kubernetes import client

from draftgen import crd as crd_module
from tests.conftest import REPO
from tests.operator.conftest import manifest


def create(k8s, namespace, body):
    return client.CustomObjectsApi(k8s).create_namespaced_custom_object(
        "draftgen.io", "v1alpha1", namespace, "datasetgenerations", body, field_validation="Strict")


def with_dataset(**fields):
    m = manifest()
    m["spec"]["datasets"][0].update(fields)
    return m


def with_server(**fields):
    m = manifest()
    m["spec"]["server"].update(fields)
    return m


def without(path):
    m = manifest()
    *parents, last = path.split(".")
    node = m
    for p in parents:
        node = node[p]
    del node[last]
    return m


def long_name():
    m = manifest()
    m["metadata"]["name"] = "a" * 46
    return m


INVALID = {
    "zero budget": (with_dataset(budgetTokens=0), "spec.datasets[0].budgetTokens"),
    "negative budget": (with_dataset(budgetTokens=-5), "spec.datasets[0].budgetTokens"),
    "duplicate dataset names": (manifest(datasets=[{"name": "a", "path": "x", "budgetTokens": 1},
                                                   {"name": "a", "path": "y", "budgetTokens": 1}]),
                                "spec.datasets[1]"),
    "tp does not divide gpus": (with_server(gpusPerReplica=8, tensorParallelSize=3), "spec.server.gpusPerReplica"),
    "name too long for children": (long_name(), "metadata.name must be at most 45"),
    "misspelt sampling key": (with_dataset(samplingParams={"max_tokens": 100}), "spec.datasets[0].samplingParams.max_tokens"),
    "seed instead of sampling_seed": (with_dataset(samplingParams={"seed": 1}), "spec.datasets[0].samplingParams.seed"),
    "temperature as a string": (with_dataset(samplingParams={"temperature": "0.7"}),
                                "spec.datasets[0].samplingParams.temperature"),
    "top_p over 1": (with_dataset(samplingParams={"top_p": 1.5}), "spec.datasets[0].samplingParams.top_p"),
    "no server image": (without("spec.server.image"), "spec.server.image"),
    "zero replicas": (with_server(replicas=0), "spec.server.replicas"),
    "dataset name not a DNS label": (with_dataset(name="Chat_Set"), "spec.datasets[0].name"),
    "unknown format": (with_dataset(format="csv"), "spec.datasets[0].format"),
    "shm size not a quantity": (with_server(shmSize="lots"), "spec.server.shmSize"),
    "prompt class that does not exist": (with_dataset(promptClass="huge"), "spec.datasets"),
    "two catch-all prompt classes": (manifest(promptClasses=[{"name": "a", "concurrency": 1, "maxNewTokens": 1},
                                                             {"name": "b", "concurrency": 1, "maxNewTokens": 1}]),
                                     "spec.promptClasses"),
    "eval fraction of 1.5": (manifest(merge={"evalFraction": 1.5}), "spec.merge.evalFraction"),
    "no datasets": (manifest(datasets=[]), "spec.datasets"),
    "fp8 dtype": (manifest(extraction={"dtype": "fp8"}), "spec.extraction.dtype"),
    "no output volume": (without("spec.output"), "spec.output"),
    "zero sample cap": (with_dataset(sampleCap=0), "spec.datasets[0].sampleCap"),
    "unknown spec field": (manifest(budget=5), "spec.budget"),
}


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_manifest_is_refused_naming_the_field(k8s, crd, namespace, case):
    body, field = INVALID[case]
    with pytest.raises(client.ApiException) as err:
        create(k8s, namespace, body)
    assert err.value.status in (400, 422), err.value.body
    assert field in err.value.body, err.value.body


def test_valid_manifest_is_accepted_with_defaults(k8s, crd, namespace):
    got = create(k8s, namespace, manifest())
    server = got["spec"]["server"]
    assert server["tensorParallelSize"] == 8 and server["gpusPerReplica"] == 8 and server["port"] == 30000
    assert got["spec"]["model"]["contextLength"] == 16384


@pytest.mark.parametrize("path, value, field", [
    (("model", "path"), "other-model", "spec.model"),
    (("model", "tokenizer"), "other-tokenizer", "spec.model"),
    (("datasets", 0, "path"), "prompts/other.jsonl", "spec.datasets[0].path"),
    (("output", "claimName"), "other", "spec.output"),
])
def test_fields_fixed_once_generation_started_are_immutable(k8s, crd, namespace, path, value, field):
    custom = client.CustomObjectsApi(k8s)
    name = f"imm-{len(path)}-{path[-1].lower()}"
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
