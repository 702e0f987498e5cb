"""The DatasetGeneration API (draftgen.io/v1alpha1): spec and status as pydantic models.

This is the one definition of the API. The CRD in crds/ is generated from it (`python -m
draftgen.crd`), with its descriptions (what `kubectl explain` shows) and its CEL rules; the
operator and the local runner parse objects with it. Field names are camelCase as in every
Kubernetes API.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

from draftgen_contracts import budget_shares
from draftgen_contracts.generate_config import STARTUP_TIMEOUT_S, DatasetFormat, DatasetKind
from draftgen_contracts.names import DATASET_NAME_PATTERN
from draftgen_contracts.preflight_report import DatasetReport, ModelReport
from draftgen_contracts.prompt_classes import DEFAULT_PROMPT_CLASSES, PromptClass
from draftgen_contracts.replica_status import ReplicaStatus
from draftgen_contracts.sglang_protocol import SAMPLING_PARAM_KINDS
from draftgen_contracts.states import DatasetState, Phase, Stage

from .kube_types import (Affinity, EnvVar, KeySelector, ResourceRequirements, SecurityContext, Toleration, Volume,
                         VolumeMount)

MAX_REPLICAS = 64
MAX_NODES_PER_REPLICA = 16
MAX_DATASETS = 64
# Names that reach an object's name or a label value (k8s.io/apimachinery pkg/util/validation):
# a DNS-1123 subdomain; one that is also a label value (<= 63, no uppercase).
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
DNS_LABEL_VALUE = r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$"


def cel(rule: str, message: str, reason: str | None = None, field_path: str | None = None) -> dict:
    out = {"rule": rule, "message": message}
    if reason:
        out["reason"] = reason
    if field_path:
        out["fieldPath"] = field_path
    return out


def k8s(**extensions) -> dict:
    """Schema extensions for a field (x-kubernetes-*), written with python names."""
    names = {"validations": "x-kubernetes-validations", "preserve": "x-kubernetes-preserve-unknown-fields",
             "list_type": "x-kubernetes-list-type", "list_map_keys": "x-kubernetes-list-map-keys",
             "embedded": "x-kubernetes-embedded-resource", "int_or_string": "x-kubernetes-int-or-string"}
    return {names[k]: v for k, v in extensions.items()}


IMMUTABLE = k8s(validations=[cel("self == oldSelf", "is immutable: it cannot change once generation started")])
FREE_FORM = k8s(preserve=True)


class Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


# --- spec -----------------------------------------------------------------------------------------

class ChatTemplate(Model):
    """Options for the model's own chat template."""

    enable_thinking: bool | None = Field(None, description=(
        "Thinking on or off, passed to the chat template as `enable_thinking` and `thinking`. "
        "Unset: the template's default."))
    kwargs: dict[str, Any] = Field(default_factory=dict, json_schema_extra=FREE_FORM, description=(
        "Extra keyword arguments for the model's chat template (transformers apply_chat_template)."))

    def template_kwargs(self) -> dict[str, Any]:
        thinking = {} if self.enable_thinking is None else {"enable_thinking": self.enable_thinking,
                                                            "thinking": self.enable_thinking}
        return {**thinking, **self.kwargs}


class TargetModel(Model):
    """The target model: its checkpoint and tokenizer on a volume, and how prompts are templated."""

    claim_name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN,
                            description="PersistentVolumeClaim holding the checkpoint; mounted read-only.")
    mount_path: str = Field("/models", pattern=r"^/", max_length=512,
                            description="Where the model volume is mounted in the pods.")
    path: str = Field(min_length=1, max_length=512, description="The checkpoint's folder, relative to the model volume.")
    tokenizer: str | None = Field(None, max_length=512,
                                  description="Tokenizer folder relative to the model volume (default: path).")
    chat_template: ChatTemplate = Field(default_factory=ChatTemplate, description="Chat-template options.")
    trust_remote_code: bool = Field(False, description=(
        "Run the Python that the model folder ships (auto_map in config.json or tokenizer_config.json: a custom "
        "tokenizer or model class, as Kimi-K2.5's) in every pod that loads it: preflight, generation, "
        "extraction, and the server, which gets --trust-remote-code from this field alone. Off, a folder "
        "that needs it fails preflight naming the file that asked (docs/security.md#remote-code)."))
    context_length: int = Field(32768, ge=256, le=1048576, description=(
        "Context length the server runs with; every maxNewTokens must be below it."))

    def checkpoint_path(self) -> str:
        return f"{self.mount_path.rstrip('/')}/{self.path}"

    def tokenizer_path(self) -> str:
        return f"{self.mount_path.rstrip('/')}/{self.tokenizer or self.path}"


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


# What every container needs for Pod Security restricted but the user (k8s.io/pod-security-admission
# policy: allowPrivilegeEscalation, capabilities, seccompProfile); the server's default adds nothing.
SERVER_SECURITY_CONTEXT = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                           "seccompProfile": {"type": "RuntimeDefault"}}


class Endpoint(Model):
    """A server that already runs (its own Deployment, OME, llm-d): draftgen starts only the generation
    clients against it (docs/operator.md#a-server-that-already-runs)."""

    url: str = Field(pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$", max_length=2048, description=(
        "The server's base URL, as the generation pods reach it (http://sglang.team-a.svc:30000)."))
    api_key: KeySelector | None = Field(None, description=(
        "The Secret key holding the server's --api-key, when it has one."))
    admin_api_key: KeySelector | None = Field(None, description=(
        "The Secret key holding the server's --admin-api-key: aborts at the budget take it when the server "
        "has one (without it, a server with an admin key refuses them and the replicas stop before any row)."))
    served_model_name: str | None = Field(None, min_length=1, max_length=512, description=(
        "The model name the server answers on /v1/models (default: the last component of model.path); the "
        "preflight refuses a server that serves another."))


class Server(Model):
    """The SGLang generation server: one replica per GPU node, run as a native sidecar of the generate pod;
    or, with `endpoint`, a server that already runs."""

    image: str | None = Field(None, min_length=1, description=(
        "SGLang image run as the generation pods' native sidecar (exactly one of image and endpoint)."))
    endpoint: Endpoint | None = Field(None, description=(
        "A server that already runs, instead of an image: no GPU Job; `replicas` generation clients (CPU pods) "
        "each drive one server's worth of the classes' concurrency against it."))
    command: list[str] = Field(["python3", "-m", "sglang.launch_server"],
                               description="The server's command; draftgen adds model, parallelism, host and port.")
    args: list[Annotated[str, StringConstraints(max_length=4096)]] = Field(
        default_factory=list, max_length=256, description="Extra server arguments (e.g. --mem-fraction-static 0.88).")
    tensor_parallel_size: int = Field(8, ge=1, le=64, description="SGLang --tp-size.")
    gpus_per_replica: int = Field(8, ge=1, le=64, description=(
        "nvidia.com/gpu per generation pod (one pod per node; a replica has nodesPerReplica of them)."))
    replicas: int = Field(1, ge=1, le=MAX_REPLICAS, description="Generation replicas, each on GPU nodes of its own.")
    nodes_per_replica: int = Field(1, ge=1, le=MAX_NODES_PER_REPLICA, description=(
        "GPU nodes one replica's server spans (SGLang --nnodes): one pod per node, gpusPerReplica GPUs each, "
        "rank 0 serving the API; the group starts, ends and restarts as one (docs/multi-node.md)."))
    port: int = Field(30000, ge=1024, le=65535, description="The server's port inside the pod.")
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements, description=(
        "The server container's resources (cpu, memory); its nvidia.com/gpu limit comes from gpusPerReplica."))
    generate_resources: ResourceRequirements = Field(
        default_factory=lambda: ResourceRequirements(requests={"cpu": "2", "memory": "8Gi"}), description=(
            "The resources of the generation client beside the server (`jobrunner generate`, one per pod)."))
    env: list[EnvVar] = Field(default_factory=list, max_length=128, json_schema_extra=k8s(
        list_type="map", list_map_keys=["name"]), description=(
            "Environment of the server container and of the extraction container, which loads the same model "
            "(NCCL_*, SGLANG_*, a cache folder): values, or valueFrom a Secret, ConfigMap or field."))
    volume_mounts: list[VolumeMount] = Field(default_factory=list, max_length=32, json_schema_extra=k8s(
        list_type="map", list_map_keys=["mountPath"]), description=(
            "Volumes of pods.volumes mounted into the server container and the extraction container (a node-local "
            "NVMe cache for weights)."))
    node_selector: dict[str, Annotated[str, StringConstraints(max_length=63)]] = Field(
        default_factory=lambda: {"nvidia.com/gpu.present": "true"}, max_length=64,
        description="Node selector of the GPU pods: generation, and extraction when extraction.gpus > 0.")
    tolerations: list[Toleration] = Field(default_factory=lambda: [Toleration(**GPU_TOLERATION)], max_length=64,
                                          description="Tolerations of the GPU pods.")
    affinity: Affinity | None = Field(None, description=(
        "Affinity of the GPU pods; the generation pods also keep draftgen's anti-affinity (one per node)."))
    shm_size: str = Field("64Gi", description="Size of the memory-backed /dev/shm (a Kubernetes quantity).")
    startup_timeout_seconds: int = Field(STARTUP_TIMEOUT_S, ge=60, le=86400, description=(
        "How long the server may take to load weights, compile and capture graphs before its pod fails."))
    expected_tokens_per_second: float = Field(2500.0, gt=0, description=(
        "Output tokens/s one replica is expected to generate: the estimate's rate until the replicas "
        "measure theirs (default: a ~1T-parameter MoE on 8 GPUs at the reference concurrency)."))
    security_context: SecurityContext = Field(
        default_factory=lambda: SecurityContext.model_validate(SERVER_SECURITY_CONTEXT), description=(
            "The server container's securityContext (also the SGLang extraction's). The default keeps the "
            "image's root user (SGLang's images run as root) with every capability dropped, no privilege "
            "escalation and the runtime's seccomp profile: Pod Security baseline. A namespace enforcing "
            "restricted needs runAsNonRoot and a user the image can run as (docs/security.md)."))


class SamplingParams(Model):
    """SGLang's sampling_params, typed so a misspelt key (max_tokens, seed) is refused at admission."""
    model_config = ConfigDict(extra="forbid", alias_generator=None)  # SGLang's own snake_case names
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=-1)
    min_p: float | None = Field(None, ge=0, le=1)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    repetition_penalty: float | None = Field(None, gt=0, le=2)
    min_new_tokens: int | None = Field(None, ge=0)
    stop: list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool | None = None
    skip_special_tokens: bool | None = None
    spaces_between_special_tokens: bool | None = None
    no_stop_trim: bool | None = None
    sampling_seed: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


assert set(SamplingParams.model_fields) <= set(SAMPLING_PARAM_KINDS), "sampling params SGLang does not know"


class DatasetFields(Model):
    """Which column of a row holds what, for datasets whose columns have other names
    (docs/inputs.md#fields-columns-of-other-names)."""

    prompt: str | None = Field(None, min_length=1, max_length=256, description="A column of text: the user's turn.")
    system: str | None = Field(None, min_length=1, max_length=256, description="A column of text: the system prompt.")
    messages: str | None = Field(None, min_length=1, max_length=256, description=(
        "A column holding a list of turns (role/content or from/value)."))
    tools: str | None = Field(None, min_length=1, max_length=256, description="A column holding the tools offered.")
    id: str | None = Field(None, min_length=1, max_length=256, description=(
        "A column holding the row's own id: it becomes the sample's source_id (a repeated id is skipped)."))


class Dataset(Model):
    """One prompt dataset and its token budget."""

    name: str = Field(pattern=DATASET_NAME_PATTERN, description="Unique name (DNS label, <= 40).")
    path: str = Field(min_length=1, max_length=512, json_schema_extra=IMMUTABLE, description=(
        "A prompt file, a folder of them or a glob (a Hugging Face shard set), read in name order: relative to the "
        "output volume, or absolute under the output volume (/data), inputs.mountPath or model.mountPath "
        "(docs/inputs.md)."))
    format: DatasetFormat = Field("auto", json_schema_extra=IMMUTABLE, description=(
        "auto: told by each file's first bytes (Parquet, a JSON array, else JSON Lines); or jsonl, json, parquet."))
    fields: DatasetFields | None = Field(None, json_schema_extra=IMMUTABLE, description=(
        "The columns holding the prompt, system prompt, messages, tools and row id, when they have other names. "
        "Rows in the known shapes need none: OpenAI messages, ShareGPT conversations, prompt, input_ids, "
        "OpenAI batch requests, Glaive function-calling chats (docs/inputs.md)."))
    pretokenized: bool = Field(False, json_schema_extra=IMMUTABLE,
                               description="Rows carry input_ids used as they are (no chat template).")
    kind: DatasetKind = Field("prompts", json_schema_extra=IMMUTABLE, description=(
        "prompts: responses are generated; traces: rows already hold the target model's responses (token ids "
        "with the response span, or messages ending with the assistant's turn), taken into the corpus as they "
        "are up to the budget, never sent to the server (docs/traces.md)."))
    budget_tokens: int = Field(ge=1, description="Completion tokens to keep for this dataset, over all replicas.")
    sample_cap: int | None = Field(None, ge=1, description="Optional cap on completed responses.")
    prompt_class: str | None = Field(None, max_length=16,
                                     description="Put every prompt in this class instead of classing by length.")
    max_new_tokens: int | None = Field(None, ge=1, description="Overrides the prompt class's max_new_tokens.")
    concurrency: int | None = Field(None, ge=1, description="Overrides the prompt class's concurrency.")
    sampling_params: SamplingParams = Field(default_factory=SamplingParams, description=(
        "SGLang sampling_params (its own snake_case names); max_new_tokens comes from the class or dataset. "
        "A key left unset takes the model's recommendation from its generation_config.json (temperature, "
        "top_p, top_k, min_p, repetition_penalty), then SGLang's own default: SGLang applies that file to "
        "its OpenAI routes only, not to the native /generate draftgen sends (docs/sglang.md#sampling-defaults). "
        "The sampling each dataset used is in the run's provenance."))
    chat_template: ChatTemplate | None = Field(None, json_schema_extra=IMMUTABLE, description=(
        "Chat-template options for this dataset over model.chatTemplate: enableThinking here wins, kwargs are "
        "merged over the model's (thinking on for reasoning data, off for short tool calls, in one run)."))


class Output(Model):
    """Where prompts are read from and everything is written: a PersistentVolumeClaim never deleted by draftgen."""

    claim_name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN,
                            description="PersistentVolumeClaim for prompts and outputs; mounted at /data.")
    path: str | None = Field(None, pattern=r"^[^/]", max_length=512,
                             description="Folder on the volume for this run (default: the object's name).")


class Inputs(Model):
    """A volume of prompt files shared by runs (a team's prompt library), mounted read-only where datasets
    are read, so prompts need not be copied onto every run's output volume (docs/inputs.md#where-files-live)."""

    claim_name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN,
                            description="PersistentVolumeClaim holding the prompt files; mounted read-only.")
    mount_path: str = Field("/inputs", pattern=r"^/.", max_length=512, description=(
        "Where it is mounted in the pods that read datasets; a dataset path under it reads from it."))


class Merge(Model):
    """How the generated responses become one training corpus."""

    truncated: Literal["keep", "drop", "mark"] = Field("mark", description=(
        "Responses cut at max_new_tokens: keep them, drop them, or keep and mark them."))
    dedupe: bool = Field(True, description="Drop exact duplicates by token content.")
    seed: int = Field(0, description="Seed of the shuffle and the train/eval split.")
    eval_fraction: float = Field(0.01, ge=0, lt=1, description="Share of samples in the eval split.")
    shard_records: int = Field(100000, ge=1, description="Records per output shard.")
    draft_vocab_size: int = Field(32000, ge=0, le=1_000_000, description=(
        "Size of the EAGLE-3 draft vocabulary: the merge counts the train split's trainable tokens and, when the "
        "target's vocabulary is larger, writes the d2t/t2d maps of its most frequent tokens in SpecForge's and "
        "speculators' own files, into corpus/vocab/ (docs/formats.md#the-draft-vocabulary). 0: counts only. 32000 "
        "is both trainers' default."))
    exports: list[Literal["hf-parquet", "speculators-jsonl"]] = Field(
        default_factory=list, max_length=2, json_schema_extra=k8s(list_type="set"),
        description="Corpus exports for trainers, into corpus/exports/<kind>/ (docs/formats.md#corpus-exports).")
    resources: ResourceRequirements = Field(
        default_factory=lambda: ResourceRequirements(requests={"cpu": "2", "memory": "2Gi"}, limits={"memory": "4Gi"}),
        description="The merge container's resources.")


class Extraction(Model):
    """EAGLE-3 hidden-state extraction over the merged corpus."""

    enabled: bool = Field(False, description="Extract the target model's hidden states after the merge.")
    drafters: list[Literal["eagle3", "dflash", "mtp"]] = Field(
        default_factory=lambda: ["eagle3"], min_length=1, max_length=3, json_schema_extra=k8s(list_type="set"),
        description=(
            "The drafters the states serve; one forward stores every layer they read: eagle3 {1, N/2-1, N-4}, "
            "dflash five layers from 1 to N-4, mtp the final state alone (with another drafter or layers); each "
            "state export writes a layout per drafter its trainer trains (docs/eagle3.md#drafters)."))
    layers: list[int] | None = Field(None, max_length=16, description=(
        "Decoder layers (0-based) whose outputs are stored, replacing the drafters' defaults (eagle3 and dflash "
        "then both read these)."))
    backend: Literal["transformers", "sglang"] = Field("transformers", description=(
        "What runs the target model: sglang (SGLang's own model runner with the generation server's "
        "image, tensor parallelism and flags; recommended for large and quantized models) or transformers "
        "(device_map auto). Both store the same states (docs/eagle3.md#the-sglang-backend)."))
    dtype: Literal["bf16", "fp16", "fp8"] = Field("bf16", description=(
        "Storage dtype of the states; fp8 is e4m3 with one float32 scale per token and state, about half "
        "of bf16 (docs/formats.md#fp8-states)."))
    final_state: Literal["post-norm", "pre-norm"] = Field("post-norm", description=(
        "Store the last hidden state after the final norm (as SpecForge) or before it (as speculators)."))
    max_length: int = Field(16384, ge=16, description="Longest sequence extracted.")
    too_long: Literal["truncate", "skip"] = Field("truncate", description="What happens to longer sequences.")
    shard_mb: int = Field(1024, ge=1, description="Target size of a safetensors shard.")
    exports: list[Literal["specforge", "speculators"]] = Field(
        default_factory=list, max_length=2, json_schema_extra=k8s(list_type="set"), description=(
            "State exports for trainers, into hidden-states/exports/<kind>/train/ and eval/: specforge needs finalState "
            "post-norm, speculators pre-norm (docs/formats.md#state-exports)."))
    gpus: int = Field(8, ge=0, le=64, description=(
        "nvidia.com/gpu of the extraction pod: on the GPU nodes (server's placement) when > 0, else on the CPU "
        "stages' (cpuStages)."))
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements, description=(
        "The extraction container's resources; its nvidia.com/gpu limit comes from gpus."))
    expected_tokens_per_second: float = Field(10000.0, gt=0, description=(
        "Corpus tokens/s the extraction pod is expected to read: the estimate's extraction rate (default: "
        "the 10,000 tokens/s per 8-GPU node the SGLang backend is sized for, not yet measured on a GPU; "
        "bench/extraction_gpu.py measures a card's)."))


class PreflightStage(Model):
    """The CPU check of the model, the tokenizer and the datasets before any GPU is asked for."""

    resources: ResourceRequirements = Field(
        default_factory=lambda: ResourceRequirements(requests={"cpu": "1", "memory": "2Gi"}, limits={"memory": "8Gi"}),
        description="The preflight container's resources.")


class Placement(Model):
    """Where a group of pods may run (their pod spec's nodeSelector, tolerations and affinity)."""

    node_selector: dict[str, Annotated[str, StringConstraints(max_length=63)]] = Field(
        default_factory=dict, max_length=64, description="Node selector.")
    tolerations: list[Toleration] = Field(default_factory=list, max_length=64, description="Tolerations.")
    affinity: Affinity | None = Field(None, description="Affinity.")


class CpuStages(Placement):
    """Where the CPU pods run, and the Kueue queue they wait in."""

    queue_name: str | None = Field(None, max_length=63, pattern=DNS_LABEL_VALUE, description=(
        "Kueue LocalQueue for the Jobs whose pods ask for no GPU (preflight, merge, a CPU extraction); unset, "
        "they are not queued. spec.queueName is the GPU Jobs' alone: a CPU Job in a GPU queue would wait for "
        "GPU quota, or for a flavor whose nodeLabels contradict cpuStages.nodeSelector."))


# Pod volumes draftgen names itself (plan.py): a volume of pods.volumes takes another name.
OWN_VOLUMES = ["data", "model", "config", "dshm", "server-keys", "scratch", "inputs", "jobrunner-code"]


class Pods(Model):
    """What every pod of the run carries beside draftgen's own settings."""

    annotations: dict[str, Annotated[str, StringConstraints(max_length=65536)]] = Field(
        default_factory=dict, max_length=64, description="Annotations of every pod.")
    labels: dict[str, Annotated[str, StringConstraints(max_length=63)]] = Field(
        default_factory=dict, max_length=64, description=(
            "Labels of every pod (a policy's, a cost center's); keys under draftgen.io/ are draftgen's own."))
    priority_class_name: str | None = Field(None, max_length=253, pattern=DNS_SUBDOMAIN, description=(
        "The PriorityClass of every pod (with Kueue, a WorkloadPriorityClass goes on the Jobs instead)."))
    volumes: list[Volume] = Field(default_factory=list, max_length=32, json_schema_extra=k8s(
        list_type="map", list_map_keys=["name"]), description=(
            "Volumes for server.volumeMounts, added to the pods whose containers mount them (generation and "
            "extraction). Names other than draftgen's own: " + ", ".join(OWN_VOLUMES) + "."))


class SecretName(Model):
    """A Secret in the object's namespace (Kubernetes' LocalObjectReference)."""

    name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)


class DatasetGenerationSpec(Model):
    """What to generate, with which model and server, within which budgets."""

    model: TargetModel = Field(json_schema_extra=IMMUTABLE, description="The target model (immutable).")
    server: Server
    pods: Pods = Field(default_factory=Pods, description=(
        "Annotations, labels, priority class and extra volumes of every pod the run creates."))
    cpu_stages: CpuStages = Field(default_factory=CpuStages, description=(
        "Where the CPU pods run (preflight, merge, and extraction when extraction.gpus is 0), apart from the GPU "
        "pods (server.nodeSelector, tolerations and affinity), and their Kueue queue."))
    preflight: PreflightStage = Field(default_factory=PreflightStage)
    runner_image: str | None = Field(None, description="Image for jobrunner (default: the operator's).")
    image_pull_secrets: list[SecretName] = Field(
        default_factory=list, max_length=16, json_schema_extra=k8s(list_type="map", list_map_keys=["name"]),
        description=("Secrets in this namespace for pulling the runner's and the server's images (a private "
                     "registry or mirror), on every pod the run creates, after the operator's default "
                     "(the chart's runImagePullSecrets). A change applies to the Jobs created after it."))
    prompt_classes: list[PromptClass] = Field(
        default_factory=lambda: list(DEFAULT_PROMPT_CLASSES), max_length=8,
        json_schema_extra=k8s(list_type="map", list_map_keys=["name"]),
        description="Prompt classes by prompt length, each with its concurrency and max_new_tokens.")
    datasets: list[Dataset] = Field(min_length=1, max_length=MAX_DATASETS,
                                    json_schema_extra=k8s(list_type="map", list_map_keys=["name"]))
    output: Output = Field(json_schema_extra=IMMUTABLE)
    inputs: Inputs | None = Field(None, json_schema_extra=IMMUTABLE, description=(
        "A read-only volume of prompt files: datasets[].path may be an absolute path under its mountPath."))
    merge: Merge = Field(default_factory=Merge)
    extraction: Extraction = Field(default_factory=Extraction)
    at_budget: Literal[budget_shares.AT_BUDGET] = Field(budget_shares.CUT, description=(
        "What happens to the requests in flight when a replica's part of a budget is made: cut (their "
        "partial responses are kept, marked truncated, and every slot stays busy to the end) or abort "
        "(thrown away: complete responses only, at the cost of idle servers or excess; docs/budgets.md)."))
    suspend: bool = Field(False, description=(
        "No GPU Job runs (running ones are deleted) and all data is kept; the CPU preflight still runs, so a run "
        "created suspended shows its plan (status.preflight, status.estimate) before any GPU is asked for "
        "(docs/preflight.md#a-plan-before-the-gpus). false resumes where it stopped, without checking again."))
    queue_name: str | None = Field(None, max_length=63, pattern=DNS_LABEL_VALUE, description=(
        "Kueue LocalQueue for the Jobs whose pods ask for GPUs (kueue.x-k8s.io/queue-name): a name that is also "
        "a label value. The CPU Jobs queue in cpuStages.queueName."))

    def dataset(self, name: str) -> Dataset:
        return next(d for d in self.datasets if d.name == name)


# --- status ---------------------------------------------------------------------------------------



class Condition(Model):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""
    observed_generation: int | None = None


class DatasetStatus(Model):
    """One dataset's progress over all replicas."""

    name: str
    budget_tokens: int = 0
    # Unset until a replica reports the dataset: a run deleted and created again has its data on
    # disk, and a 0 before the first report would be a figure that falls.
    tokens: int | None = Field(None, description="Kept completion tokens over all replicas; unset until a replica reports.")
    samples: int | None = Field(None, description="Kept samples over all replicas; unset until a replica reports.")
    state: DatasetState = DatasetState.PENDING
    truncated: int = Field(0, description="Responses cut off: at maxNewTokens, or at the budget.")
    cut: int = Field(0, description="Of them, the responses cut at the budget (atBudget: cut).")
    cut_tokens: int = Field(0, description="The kept tokens of the responses cut at the budget.")
    cut_samples_percent: float = Field(0.0, description="The responses cut at the budget, in % of the kept samples.")
    cut_tokens_percent: float = Field(0.0, description="Their tokens, in % of the kept tokens.")
    skipped: int = 0
    tokens_per_second: float = 0.0
    last_update: str | None = None


class DatasetEstimate(Model):
    name: str
    response_tokens: int = Field(0, description="Tokens this dataset is expected to end with.")
    samples: int = Field(0, description="Responses it is expected to end with.")
    mean_response_tokens: float = 0.0
    length_basis: Literal["prior", "measured"] = Field("prior", description=(
        "measured: the dataset's own mean over its responses; prior: half of its rows' max new tokens."))
    reachable: bool = Field(True, description="Its usable rows may reach its budget.")


class Estimate(Model):
    """What the run will generate, store and cost: from the spec and the preflight before generation,
    refreshed from the measured lengths and rate while it runs (docs/preflight.md#the-estimate)."""

    response_tokens: int = Field(0, description="Response tokens of the corpus over all datasets.")
    generated_tokens: int = Field(0, description="Of them, those the servers generate (existing traces excluded).")
    prompt_tokens: int = Field(0, description="Prompt tokens of those samples (extraction stores them too).")
    corpus_tokens: int = Field(0, description="Prompt + response tokens: what extraction reads.")
    hidden_state_bytes: int = 0
    hidden_state_size: str = Field("", description="hiddenStateBytes for people (GB, TB).")
    export_bytes: int = Field(0, description=(
        "What the exports write beside: the state exports (extraction.exports; SpecForge's in bf16 whatever the "
        "storage dtype) and the corpus exports (merge.exports)."))
    export_hours: float = Field(0.0, description="Writing the exports, at an assumed 500 MB/s.")
    disk_bytes: int = Field(0, description=(
        "Everything the run writes to its output volume: the generation records, the corpus, the hidden states "
        "and every export."))
    disk_size: str = Field("", description="diskBytes for people (GB, TB): the output claim must hold it.")
    tokens_per_second: float = Field(0.0, description="Output tokens/s of all replicas.")
    rate_basis: Literal["expected", "measured"] = "expected"
    generation_hours: float = Field(0.0, description="Generation time left at the rate.")
    generation_ends: str | None = Field(None, description="Projected end of generation (measured rate only).")
    gpu_hours: float = Field(0.0, description="GPU-hours of the whole generation at the rate (loading excluded).")
    extraction_tokens_per_second: float = Field(0.0, description=(
        "Tokens/s of the extraction pod: its measured rate once it reports one, else "
        "spec.extraction.expectedTokensPerSecond (0 with extraction off)."))
    extraction_rate_basis: Literal["expected", "measured"] = "expected"
    extraction_hours: float = Field(0.0, description=(
        "Extraction time of the tokens it stores at extractionTokensPerSecond (0 with it off)."))
    extraction_gpu_hours: float = Field(0.0, description="extractionHours x extraction.gpus.")
    extraction_ends: str | None = Field(None, description=(
        "Projected end of a running extraction: its corpus tokens not stored yet at its measured rate, "
        "from its last report."))
    datasets: list[DatasetEstimate] = Field(default_factory=list,
                                            json_schema_extra=k8s(list_type="map", list_map_keys=["name"]))
    assumptions: str = ""


class ExtractionStatus(Model):
    """The extraction pod's last report (draftgen_contracts.extraction_progress)."""

    tokens: int = Field(0, description="Tokens whose states are stored (on disk, resumed runs included).")
    samples: int = Field(0, description="Samples whose states are stored.")
    corpus_tokens: int = Field(0, description="Tokens of the corpus it reads (before maxLength's truncation and skips).")
    tokens_per_second: float = Field(0.0, description="Tokens extracted per second since its model was loaded.")
    finished: bool = False
    report_time: str | None = Field(None, description="When the pod wrote the report.")


class Preflight(Model):
    """What the preflight found on the CPU before any GPU was asked for (docs/preflight.md)."""

    # The findings' own models (draftgen_contracts.preflight_report); the problem as one line.
    model: ModelReport | None = None
    datasets: list[DatasetReport] = Field(default_factory=list,
                                          json_schema_extra=k8s(list_type="map", list_map_keys=["name"]))
    problem: str = ""
    rows_per_second: float = 0.0


class StageJobs(Model):
    generation: list[str] = Field(default_factory=list)
    merge: str | None = None
    extract: str | None = None


class DatasetGenerationStatus(Model):
    """Written by the operator alone."""

    phase: Phase = Phase.PENDING
    stage: Stage | None = Field(None, description=(
        "Where the pipeline stands (phase shows Suspended or Failed over it)."))
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list,
                                        json_schema_extra=k8s(list_type="map", list_map_keys=["type"]))
    datasets: list[DatasetStatus] = Field(default_factory=list,
                                          json_schema_extra=k8s(list_type="map", list_map_keys=["name"]))
    replicas: list[ReplicaStatus] = Field(default_factory=list,
                                          json_schema_extra=k8s(list_type="map", list_map_keys=["index"]))
    tokens: int | None = Field(None, description="Kept completion tokens over every dataset reported so far.")
    budget_tokens: int = 0
    progress: str = ""
    ready_replicas: int | None = Field(None, description=(
        "Generation replicas whose server is ready, of spec.server.replicas (condition Capacity says why "
        "the others are not); set while generating."))
    jobs: StageJobs = Field(default_factory=StageJobs)
    start_time: str | None = None
    completion_time: str | None = None
    estimate: Estimate | None = None
    preflight: Preflight | None = None
    extraction: ExtractionStatus | None = Field(None, description="Set once the extraction pod reports.")
    retry: str | None = Field(None, description=(
        "The value of the annotation draftgen.io/retry this status has answered: a new value retries a Failed run."))
