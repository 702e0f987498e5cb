"""draftgen.kube_types held to the API server's own OpenAPI schema of each Kubernetes type: every field
we take exists there with the same kind of value, every field Kubernetes requires we require, the
values we enumerate are among Kubernetes' own, and what we leave out is exactly what the docstrings
say (so a typo is refused at admission, and nothing valid in a Pod is refused here by accident)."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from draftgen import kube_types as k

CORE, META = "io.k8s.api.core.v1.", "io.k8s.apimachinery.pkg.apis.meta.v1."
THEIRS = {
    k.ResourceRequirements: CORE + "ResourceRequirements", k.Toleration: CORE + "Toleration",
    k.NodeSelectorRequirement: CORE + "NodeSelectorRequirement", k.NodeSelectorTerm: CORE + "NodeSelectorTerm",
    k.NodeSelector: CORE + "NodeSelector", k.PreferredSchedulingTerm: CORE + "PreferredSchedulingTerm",
    k.NodeAffinity: CORE + "NodeAffinity", k.LabelSelectorRequirement: META + "LabelSelectorRequirement",
    k.LabelSelector: META + "LabelSelector", k.PodAffinityTerm: CORE + "PodAffinityTerm",
    k.WeightedPodAffinityTerm: CORE + "WeightedPodAffinityTerm", k.PodAffinity: CORE + "PodAffinity",
    k.Affinity: CORE + "Affinity", k.Capabilities: CORE + "Capabilities", k.SELinuxOptions: CORE + "SELinuxOptions",
    k.SeccompProfile: CORE + "SeccompProfile", k.AppArmorProfile: CORE + "AppArmorProfile",
    k.SecurityContext: CORE + "SecurityContext", k.ObjectFieldSelector: CORE + "ObjectFieldSelector",
    k.ResourceFieldSelector: CORE + "ResourceFieldSelector", k.KeySelector: CORE + "SecretKeySelector",
    k.EnvVarSource: CORE + "EnvVarSource", k.EnvVar: CORE + "EnvVar", k.KeyToPath: CORE + "KeyToPath",
    k.PersistentVolumeClaimVolumeSource: CORE + "PersistentVolumeClaimVolumeSource",
    k.HostPathVolumeSource: CORE + "HostPathVolumeSource", k.EmptyDirVolumeSource: CORE + "EmptyDirVolumeSource",
    k.ConfigMapVolumeSource: CORE + "ConfigMapVolumeSource", k.SecretVolumeSource: CORE + "SecretVolumeSource",
    k.NFSVolumeSource: CORE + "NFSVolumeSource", k.LocalObjectReference: CORE + "LocalObjectReference",
    k.CSIVolumeSource: CORE + "CSIVolumeSource", k.Volume: CORE + "Volume", k.VolumeMount: CORE + "VolumeMount",
}
# Left out on purpose, as each type's docstring says; everything else of Kubernetes' type is taken.
LEFT_OUT = {
    k.ResourceRequirements: {"claims"}, k.SecurityContext: {"windowsOptions"}, k.EnvVarSource: {"fileKeyRef"},
    k.Volume: {"awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "downwardAPI", "ephemeral", "fc",
               "flexVolume", "flocker", "gcePersistentDisk", "gitRepo", "glusterfs", "image", "iscsi", "photonPersistentDisk",
               "portworxVolume", "projected", "quobyte", "rbd", "scaleIO", "storageos", "vsphereVolume"},
    # ConfigMapVolumeSource's and SecretVolumeSource's `name`/`secretName` are optional there (an empty
    # name); draftgen requires them. LocalObjectReference likewise.
}


@pytest.fixture(scope="module")
def schemas(cluster) -> dict:
    api = cluster.api_client()
    try:
        response = api.call_api("GET", f"{api.configuration.host}/openapi/v3/api/v1")
        return json.loads(response.read())["components"]["schemas"]
    finally:
        api.close()


def kind(prop: dict, schemas: dict) -> str:
    """What a property holds, coarsely: string, integer, boolean, number, array, object, quantity."""
    if "allOf" in prop:
        prop = prop["allOf"][0]
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        return "quantity" if name.endswith("resource.Quantity") else kind(schemas[name], schemas)
    return prop.get("type", "object")


def ours(model: type[BaseModel]) -> dict[str, tuple[str, bool, list | None]]:
    """Our fields by their manifest names: (kind, required, enumerated values)."""
    schema = model.model_json_schema(by_alias=True)
    defs = schema.get("$defs", {})
    out = {}
    for name, prop in schema["properties"].items():
        variants = [v for v in prop.get("anyOf", [prop]) if v.get("type") != "null"]
        node = variants[0]
        node = defs.get(node.get("$ref", "").rsplit("/", 1)[-1], node)
        if prop.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-int-or-string"):
            what = "quantity"
        else:
            what = node.get("type", "object")
        out[name] = (what, name in schema.get("required", []), node.get("enum"))
    return out


@pytest.mark.parametrize("model", list(THEIRS), ids=lambda m: m.__name__)
def test_each_type_is_kubernetes_own(schemas, model):
    theirs = schemas[THEIRS[model]]
    properties, required = theirs["properties"], set(theirs.get("required", []))
    mine = ours(model)
    assert set(properties) - set(mine) == LEFT_OUT.get(model, set()), "fields left out, or missing"
    for name, (what, is_required, values) in mine.items():
        assert name in properties, f"{name}: not a field of {THEIRS[model]}"
        assert what == kind(properties[name], schemas), name
        if values and properties[name].get("enum"):
            assert set(values) <= set(properties[name]["enum"]), name
    assert required <= {name for name, (_, is_required, _) in mine.items() if is_required}
