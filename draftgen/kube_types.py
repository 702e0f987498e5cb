"""The Kubernetes core/v1 types a DatasetGeneration's pod settings take, typed as Kubernetes types them.

Field names and types follow k8s.io/api core/v1 (types.go, v1.36), so a manifest that is valid in a
Pod is valid here and a typo (`resources: {request: ...}`) is refused at admission naming the field,
where a free-form map would keep it silently. tests/operator/test_kube_types.py holds every model
here to the API server's own OpenAPI schema of the same type: each field exists there with the same
type. What is left out of a type (and so refused) is listed in its docstring.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, StringConstraints, WithJsonSchema
from pydantic.alias_generators import to_camel

from draftgen.cel_rules import is_quantity

QUANTITY_MESSAGE = "must be a Kubernetes quantity such as 64Gi, 500m or 2"
QUANTITY_MAX_LENGTH = 64


def _quantity(value: object) -> int | str:
    """One validator, not a union: a refusal names the field itself, as the API server does."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("must be an integer or a string")
    if isinstance(value, str) and (len(value) > QUANTITY_MAX_LENGTH or not is_quantity(value)):
        raise ValueError(QUANTITY_MESSAGE)
    return value


# resource.Quantity: an integer or a string (x-kubernetes-int-or-string), a string parsed as
# apimachinery's ParseQuantity does (draftgen.cel_rules.is_quantity; isQuantity in the CRD's rule).
# Written out as a string, as the API server returns it: the Kubernetes Python client's models refuse
# an integer there.
Quantity = Annotated[int | str, PlainValidator(_quantity), PlainSerializer(str, return_type=str), WithJsonSchema({
    "x-kubernetes-int-or-string": True, "maxLength": QUANTITY_MAX_LENGTH,
    "x-kubernetes-validations": [{"rule": "type(self) == int || isQuantity(self)", "message": QUANTITY_MESSAGE}]})]
Name = Annotated[str, StringConstraints(min_length=1, max_length=253)]


class KubeModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def manifest(self) -> dict:
        """As it goes into a pod: camelCase, unset fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True)


# --- resources -----------------------------------------------------------------------------------

class ResourceRequirements(KubeModel):
    """A container's compute resources. Left out: claims (dynamic resource allocation)."""

    # maxProperties: the API server bounds its CEL rules' cost by it (a resource kind per entry).
    limits: dict[str, Quantity] | None = Field(None, max_length=32, description="The most the container may use.")
    requests: dict[str, Quantity] | None = Field(None, max_length=32, description="What the scheduler reserves for it.")


# --- placement -----------------------------------------------------------------------------------

class Toleration(KubeModel):
    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class NodeSelectorRequirement(KubeModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] | None = None


class NodeSelectorTerm(KubeModel):
    match_expressions: list[NodeSelectorRequirement] | None = None
    match_fields: list[NodeSelectorRequirement] | None = None


class NodeSelector(KubeModel):
    node_selector_terms: list[NodeSelectorTerm]


class PreferredSchedulingTerm(KubeModel):
    weight: int = Field(ge=1, le=100)
    preference: NodeSelectorTerm


class NodeAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = None


class LabelSelectorRequirement(KubeModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = None


class LabelSelector(KubeModel):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class PodAffinityTerm(KubeModel):
    label_selector: LabelSelector | None = None
    namespaces: list[str] | None = None
    topology_key: str = Field(min_length=1)
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] | None = None
    mismatch_label_keys: list[str] | None = None


class WeightedPodAffinityTerm(KubeModel):
    weight: int = Field(ge=1, le=100)
    pod_affinity_term: PodAffinityTerm


class PodAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = None


class Affinity(KubeModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


# --- security ------------------------------------------------------------------------------------

class Capabilities(KubeModel):
    add: list[str] | None = None
    drop: list[str] | None = None


class SELinuxOptions(KubeModel):
    user: str | None = None
    role: str | None = None
    type: str | None = None
    level: str | None = None


class SeccompProfile(KubeModel):
    type: Literal["RuntimeDefault", "Unconfined", "Localhost"]
    localhost_profile: str | None = None


class AppArmorProfile(KubeModel):
    type: Literal["RuntimeDefault", "Unconfined", "Localhost"]
    localhost_profile: str | None = None


class SecurityContext(KubeModel):
    """A container's securityContext. Left out: windowsOptions (draftgen's pods run on Linux)."""

    allow_privilege_escalation: bool | None = None
    app_armor_profile: AppArmorProfile | None = None
    capabilities: Capabilities | None = None
    privileged: bool | None = None
    proc_mount: Literal["Default", "Unmasked"] | None = None
    read_only_root_filesystem: bool | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    run_as_user: int | None = None
    se_linux_options: SELinuxOptions | None = None
    seccomp_profile: SeccompProfile | None = None


# --- environment ---------------------------------------------------------------------------------

class ObjectFieldSelector(KubeModel):
    api_version: str | None = None
    field_path: str


class ResourceFieldSelector(KubeModel):
    container_name: str | None = None
    resource: str
    divisor: Quantity | None = None


class KeySelector(KubeModel):
    """ConfigMapKeySelector and SecretKeySelector (the same fields)."""

    name: Name
    key: str = Field(min_length=1)
    optional: bool | None = None


class EnvVarSource(KubeModel):
    """Where an env value comes from. Left out: fileKeyRef (alpha in Kubernetes 1.34)."""

    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None
    config_map_key_ref: KeySelector | None = None
    secret_key_ref: KeySelector | None = None


class EnvVar(KubeModel):
    name: str = Field(min_length=1, max_length=4096)
    value: str | None = None
    value_from: EnvVarSource | None = None


# --- volumes -------------------------------------------------------------------------------------

class KeyToPath(KubeModel):
    key: str
    path: str
    mode: int | None = None


class PersistentVolumeClaimVolumeSource(KubeModel):
    claim_name: Name
    read_only: bool | None = None


class HostPathVolumeSource(KubeModel):
    path: str = Field(min_length=1)
    type: Literal["", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice",
                  "BlockDevice"] | None = None


class EmptyDirVolumeSource(KubeModel):
    medium: Literal["", "Memory"] | None = None
    size_limit: Quantity | None = None


class ConfigMapVolumeSource(KubeModel):
    name: Name
    items: list[KeyToPath] | None = None
    default_mode: int | None = None
    optional: bool | None = None


class SecretVolumeSource(KubeModel):
    secret_name: Name
    items: list[KeyToPath] | None = None
    default_mode: int | None = None
    optional: bool | None = None


class NFSVolumeSource(KubeModel):
    server: str = Field(min_length=1)
    path: str = Field(min_length=1)
    read_only: bool | None = None


class LocalObjectReference(KubeModel):
    name: Name


class CSIVolumeSource(KubeModel):
    driver: str = Field(min_length=1)
    read_only: bool | None = None
    fs_type: str | None = None
    volume_attributes: dict[str, str] | None = None
    node_publish_secret_ref: LocalObjectReference | None = None


VOLUME_SOURCES = ("persistentVolumeClaim", "hostPath", "emptyDir", "configMap", "secret", "nfs", "csi")


class Volume(KubeModel):
    """A pod volume. Sources: persistentVolumeClaim, hostPath (a node-local NVMe cache), emptyDir,
    configMap, secret, nfs, csi; the others of core/v1 are left out (use a PersistentVolumeClaim)."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    host_path: HostPathVolumeSource | None = None
    empty_dir: EmptyDirVolumeSource | None = None
    config_map: ConfigMapVolumeSource | None = None
    secret: SecretVolumeSource | None = None
    nfs: NFSVolumeSource | None = None
    csi: CSIVolumeSource | None = None


class VolumeMount(KubeModel):
    name: str = Field(min_length=1, max_length=63)
    mount_path: str = Field(min_length=1, pattern=r"^/")
    read_only: bool | None = None
    sub_path: str | None = None
    sub_path_expr: str | None = None
    mount_propagation: Literal["None", "HostToContainer", "Bidirectional"] | None = None
    recursive_read_only: Literal["Disabled", "IfPossible", "Enabled"] | None = None
