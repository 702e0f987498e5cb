"""The plan: every child object of a DatasetGeneration, as a pure function of its spec.

Names are deterministic ("<name>-gen-r000", "<name>-merge", ...) so an operator restarted at any
moment finds what it already created instead of creating it twice. The local runner runs these
same objects as processes (draftgen.local.pod_process), so a laptop run and a cluster run generate alike.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from draftgen_contracts import exit_codes, names
from draftgen_contracts.provenance import draftgen_version
from draftgen_contracts.sglang_protocol import sglang_python
from draftgen_contracts.generate_config import (ContextConfig, CoordinationConfig, DatasetConfig, DatasetFields,
                                                GenerateConfig)

from . import api, rank_group, server_keys

# How often a generation pod reports (one PATCH, and one GET of its DatasetGeneration, per second).
# Replicas sharing a budget learn each other's tokens through the status, so together they overshoot
# it by about (replicas - 1) x tokens/s per replica x (this + the fold interval + this): with 4
# replicas at 2,500 tokens/s and a 2 s fold, ~30K tokens on a 10M budget (0.3%).
REPORT_INTERVAL_S = 1.0


@dataclass(frozen=True)
class OperatorSettings:
    """What the operator adds that the spec does not say."""
    # The chart always sets it (DRAFTGEN_RUNNER_IMAGE); otherwise the name `make image` tags this
    # version's local build with (docs/image.md), never a registry's repository nobody here owns.
    runner_image: str = f"localhost/draftgen:{draftgen_version()}"
    extra_pod_labels: tuple[tuple[str, str], ...] = ()  # e.g. the local kubelet's label in tests and demos
    # How replicas report and learn the status: through the API server (pods), or through files in
    # the output folder (the local runner, which has no API server).
    coordination: Literal["kubernetes", "file"] = "kubernetes"
    # Who may scrape the generation pods' metrics port (NetworkPolicy peers, JSON each, from the
    # chart's networkPolicy.metricsFrom): nobody from outside the pod by default.
    metrics_from: tuple[str, ...] = ()
    # The same peers may reach the SGLang server's port too, for its own /metrics (the chart's
    # networkPolicy.serverMetrics, DRAFTGEN_SERVER_METRICS).
    server_metrics: bool = False
    # How long a stage stopped by a full volume waits before its Job is created again (the chart's
    # volumeFullRetrySeconds, DRAFTGEN_VOLUME_FULL_RETRY).
    volume_full_retry_s: float = 300.0
    # Pull secrets every run's pods carry (the chart's runImagePullSecrets), before the spec's own.
    image_pull_secrets: tuple[str, ...] = ()


# --- labels and paths ------------------------------------------------------------------------------

def labels(name: str, component: str, **extra: str) -> dict[str, str]:
    return {names.LABEL_NAME: name, names.LABEL_COMPONENT: component, **extra}


def output_root(name: str, spec: api.DatasetGenerationSpec) -> str:
    return f"{names.DATA_MOUNT}/{spec.output.path or name}"


def dataset_path(spec: api.DatasetGenerationSpec, dataset: api.Dataset) -> str:
    return dataset.path if dataset.path.startswith("/") else f"{names.DATA_MOUNT}/{dataset.path}"


# --- the generate config --------------------------------------------------------------------------

def generate_config(spec: api.DatasetGenerationSpec, *, server_url: str, output_root: str,
                    coordination: CoordinationConfig, run_id: str, progress_interval_s: float, replica: int = 0,
                    tokenizer_path: str | None = None, dataset_paths: dict[str, str] | None = None) -> GenerateConfig:
    """jobrunner's config for one replica of this spec (its rules: draftgen_contracts.generate_config)."""
    endpoint = spec.server.endpoint
    return GenerateConfig(
        server_url=endpoint.url if endpoint else server_url,
        served_model_name=served_model_name(spec) if endpoint else None,
        startup_timeout_s=spec.server.startup_timeout_seconds, output_root=output_root,
        run_id=run_id, replica=replica, replicas=spec.server.replicas,
        tokenizer_path=tokenizer_path or spec.model.tokenizer_path(), trust_remote_code=spec.model.trust_remote_code,
        model_path=spec.model.checkpoint_path(),
        # Never a secret or the image through a symlink: the volumes datasets may be read from.
        input_roots=[names.DATA_MOUNT, *([spec.inputs.mount_path] if spec.inputs else []), spec.model.mount_path],
        chat_template_kwargs=spec.model.chat_template.template_kwargs(),
        context=ContextConfig(length=spec.model.context_length), prompt_classes=spec.prompt_classes,
        datasets=[_dataset_config(spec, d, (dataset_paths or {}).get(d.name)) for d in spec.datasets],
        at_budget=spec.at_budget, coordination=coordination, progress_interval_s=progress_interval_s)


def served_model_name(spec: api.DatasetGenerationSpec) -> str:
    """The name a server that already runs must answer on /v1/models: the endpoint's, else the model
    folder's own (SGLang's default served name is its --model-path)."""
    return spec.server.endpoint.served_model_name or spec.model.path.rstrip("/").rsplit("/", 1)[-1]


def _dataset_config(spec: api.DatasetGenerationSpec, d: api.Dataset, path: str | None) -> DatasetConfig:
    return DatasetConfig(
        name=d.name, path=path or dataset_path(spec, d), format=d.format, pretokenized=d.pretokenized, kind=d.kind,
        fields=DatasetFields(**d.fields.model_dump(exclude_none=True)) if d.fields else None,
        budget_tokens=d.budget_tokens, sample_cap=d.sample_cap, prompt_class=d.prompt_class,
        max_new_tokens=d.max_new_tokens, concurrency=d.concurrency, sampling_params=d.sampling_params.as_dict(),
        chat_template_kwargs=d.chat_template.template_kwargs() if d.chat_template else None)


def config_text(config: GenerateConfig) -> str:
    """The config's file, as jobrunner reads it (the ConfigMap's generate.yaml, the local runner's)."""
    return yaml.safe_dump(config.to_document(), sort_keys=False)


# --- child objects --------------------------------------------------------------------------------

def rbac_objects(name: str, spec: api.DatasetGenerationSpec) -> list[dict]:
    """Least privilege for the pods: read their own DatasetGeneration, read and write their own reports."""
    sa = names.service_account_name(name)
    reports = [o["metadata"]["name"] for o in report_objects(name, spec)]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "labels": labels(name, "rbac")}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": sa, "labels": labels(name, "rbac")},
         "rules": [
             {"apiGroups": [names.GROUP], "resources": [names.PLURAL], "resourceNames": [name], "verbs": ["get"]},
             {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": reports,
              "verbs": ["get", "patch", "update"]},
         ]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": sa, "labels": labels(name, "rbac")},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa},
         "subjects": [{"kind": "ServiceAccount", "name": sa}]},
    ]


def report_objects(name: str, spec: api.DatasetGenerationSpec) -> list[dict]:
    """One empty report per replica, one for the preflight's findings and, with extraction on, one
    for its progress, created by the operator (RBAC cannot limit `create` by name)."""
    def report(report_name: str, component: str, **extra: str) -> dict:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": report_name, "labels": labels(name, component, **extra)}, "data": {}}
    return [*(report(names.report_name(name, r), "report", **{names.LABEL_REPORT: "true", names.LABEL_REPLICA: str(r)})
              for r in range(spec.server.replicas)),
            report(names.preflight_report_name(name), "preflight", **{names.LABEL_PREFLIGHT: "true"}),
            *([report(names.extraction_report_name(name), "extract", **{names.LABEL_EXTRACTION: "true"})]
              if spec.extraction.enabled else [])]


def config_object(name: str, namespace: str, spec: api.DatasetGenerationSpec, settings: OperatorSettings) -> dict:
    """The generate config, named by its content's hash: a changed config is a new object, and the
    Jobs that mount it say by name which config they run."""
    coordination = (CoordinationConfig(kind="kubernetes", name=name, namespace=namespace)
                    if settings.coordination == "kubernetes" else CoordinationConfig(kind="file"))
    # The pod passes --server-url http://$(POD_IP):PORT (Kubernetes expands it in args, not in files).
    config = generate_config(
        spec, server_url="http://localhost:%d" % spec.server.port, output_root=output_root(name, spec),
        coordination=coordination, run_id=name, progress_interval_s=REPORT_INTERVAL_S)
    text = config_text(config)
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": names.config_map_name(name, digest), "labels": labels(name, "config"),
                         "annotations": {names.CONFIG_HASH_ANNOTATION: digest}},
            "data": {names.GENERATE_CONFIG_KEY: text}}


def config_digest(config: dict) -> str:
    return config["metadata"]["annotations"][names.CONFIG_HASH_ANNOTATION]


# Models and tokenizers come from the volume only: never wait on a hub from a GPU pod.
OFFLINE_ENV = [{"name": "HF_HUB_OFFLINE", "value": "1"}, {"name": "TRANSFORMERS_OFFLINE", "value": "1"}]
# draftgen's own containers as Pod Security restricted requires (docs/security.md#the-pods): the
# image's non-root user (the Dockerfile's 65532), a read-only root with /tmp as their one writable
# folder (HOME too: the libraries' caches go there).
RUNNER_USER = 65532
RUNNER_SECURITY_CONTEXT = {**api.SERVER_SECURITY_CONTEXT, "runAsNonRoot": True, "runAsUser": RUNNER_USER,
                           "runAsGroup": RUNNER_USER, "readOnlyRootFilesystem": True}
SCRATCH = "/tmp"


POD_IP_ENV = [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]


def _volumes(name: str, spec: api.DatasetGenerationSpec, *, model: bool, config: str | None, shm: bool,
             inputs: bool = False) -> list[dict]:
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": spec.output.claim_name}}]
    if inputs and spec.inputs:
        volumes.append({"name": "inputs", "persistentVolumeClaim": {"claimName": spec.inputs.claim_name,
                                                                    "readOnly": True}})
    if model:
        volumes.append({"name": "model", "persistentVolumeClaim": {"claimName": spec.model.claim_name,
                                                                   "readOnly": True}})
    if config:
        volumes.append({"name": "config", "configMap": {"name": config}})
    if shm:
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": spec.server.shm_size}})
    return volumes


def inputs_mounts(spec: api.DatasetGenerationSpec) -> list[dict]:
    """The inputs volume's mount, in the containers that read datasets (preflight, generate)."""
    return [{"name": "inputs", "mountPath": spec.inputs.mount_path, "readOnly": True}] if spec.inputs else []


def hardened(pod_spec: dict) -> dict:
    """Every container without a securityContext of its own (draftgen's: the servers' take
    spec.server.securityContext) runs as RUNNER_SECURITY_CONTEXT, writing only to a scratch emptyDir."""
    ours = [c for c in [*pod_spec.get("initContainers", []), *pod_spec["containers"]] if "securityContext" not in c]
    for container in ours:
        container["securityContext"] = dict(RUNNER_SECURITY_CONTEXT)
        container["volumeMounts"] = [*container.get("volumeMounts", []), {"name": "scratch", "mountPath": SCRATCH}]
        container["env"] = [*container.get("env", []), {"name": "HOME", "value": SCRATCH}]
    if ours:
        pod_spec["volumes"] = [*pod_spec.get("volumes", []), {"name": "scratch", "emptyDir": {}}]
        # The volumes' group is made the runner's (once: only when the volume's root differs), so a
        # claim provisioned root-owned is writable by the runner's user.
        pod_spec["securityContext"] = {"fsGroup": RUNNER_USER, "fsGroupChangePolicy": "OnRootMismatch"}
    return pod_spec


def pull_secrets(spec: api.DatasetGenerationSpec, settings: OperatorSettings) -> list[dict]:
    """The pods' imagePullSecrets: the operator's default, then the spec's, each once."""
    ordered = dict.fromkeys([*settings.image_pull_secrets, *(s.name for s in spec.image_pull_secrets)])
    return [{"name": n} for n in ordered]


def placement(spec: api.DatasetGenerationSpec, gpu: bool) -> dict:
    """nodeSelector, tolerations and affinity of a pod: the GPU nodes' (spec.server's) or the CPU
    stages' (spec.cpuStages); only what is set."""
    where = spec.server if gpu else spec.cpu_stages
    out = {"nodeSelector": where.node_selector, "tolerations": [t.manifest() for t in where.tolerations],
           "affinity": where.affinity.manifest() if where.affinity else None}
    return {k: v for k, v in out.items() if v}


def with_pod_settings(pod_spec: dict, spec: api.DatasetGenerationSpec) -> dict:
    """spec.pods on a pod: its priority class, and the volumes of spec.pods.volumes its containers mount."""
    mounted = {m["name"] for c in [*pod_spec.get("initContainers", []), *pod_spec["containers"]]
               for m in c.get("volumeMounts", [])}
    extra = [v.manifest() for v in spec.pods.volumes if v.name in mounted]
    if extra:
        pod_spec["volumes"] = [*pod_spec.get("volumes", []), *extra]
    if spec.pods.priority_class_name:
        pod_spec["priorityClassName"] = spec.pods.priority_class_name
    return pod_spec


def asks_for_gpus(pod_spec: dict) -> bool:
    return any("nvidia.com/gpu" in (c.get("resources") or {}).get("limits", {})
               for c in [*pod_spec.get("initContainers", []), *pod_spec["containers"]])


def queue_of(spec: api.DatasetGenerationSpec, pod_spec: dict) -> str | None:
    """The Kueue LocalQueue of a Job: spec.queueName for pods that ask for GPUs, cpuStages.queueName
    for the others (a CPU preflight in a GPU queue waited for GPU quota, or for good on a GPU flavor
    whose nodeLabels contradict its nodeSelector)."""
    return spec.queue_name if asks_for_gpus(pod_spec) else spec.cpu_stages.queue_name


def with_model_settings(container: dict, spec: api.DatasetGenerationSpec) -> dict:
    """spec.server.env and volumeMounts, in a container that loads the model (the server, the extraction)."""
    container["env"] = [*container.get("env", []), *(e.manifest() for e in spec.server.env)]
    container["volumeMounts"] = [*container.get("volumeMounts", []), *(m.manifest() for m in spec.server.volume_mounts)]
    return container


def _job(name: str, job_name: str, component: str, spec: api.DatasetGenerationSpec, settings: OperatorSettings,
         pod_spec: dict, *, extra_labels: dict[str, str] | None = None) -> dict:
    pod_spec = with_pod_settings(hardened(pod_spec), spec)
    if secrets := pull_secrets(spec, settings):  # every image of every pod: the runner's and the server's
        pod_spec["imagePullSecrets"] = secrets
    job_labels = labels(name, component, **(extra_labels or {}))
    metadata: dict[str, Any] = {"name": job_name, "labels": dict(job_labels)}
    job_spec: dict[str, Any] = {
        "backoffLimit": exit_codes.BACKOFF_LIMITS[component],
        # Configuration errors fail at once; disruptions (preemption, drain, eviction) are retried
        # without counting against the backoff limit, since a restarted pod resumes its output.
        "podFailurePolicy": {"rules": [
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": sorted(exit_codes.FAIL_AT_ONCE)}},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": sorted(exit_codes.WAIT_FOR_SPACE)}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        ]},
        # draftgen's labels win over the spec's (admission refuses its keys under draftgen.io/ anyway).
        "template": {"metadata": {"labels": {**spec.pods.labels, **job_labels, **dict(settings.extra_pod_labels)},
                                  **({"annotations": dict(spec.pods.annotations)} if spec.pods.annotations else {})},
                     "spec": {"restartPolicy": "Never", **pod_spec}},
    }
    # Kueue's webhook suspends a queued Job at creation and Kueue unsuspends it on admission: the
    # operator never writes spec.suspend (kueue#1726), and without Kueue installed the Job simply runs.
    if queue := queue_of(spec, pod_spec):
        metadata["labels"][names.KUEUE_QUEUE_LABEL] = queue
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": job_spec}


def resources(requirements: api.ResourceRequirements, gpus: int = 0) -> dict[str, Any]:
    """A container's resources, with `gpus` as its nvidia.com/gpu limit."""
    out = requirements.manifest()
    if gpus:
        out["limits"] = {**out.get("limits", {}), "nvidia.com/gpu": str(gpus)}
    return out


# The server binds the pod IP, and generate reaches it there (Kubernetes expands `$(POD_IP)` in args).
POD_IP = "$(POD_IP)"


def model_args(spec: api.DatasetGenerationSpec) -> list[str]:
    """The server's flags that come from spec.model beyond its path (admission refuses them in
    server.args); `jobrunner extract` spells its own the same."""
    return ["--trust-remote-code"] if spec.model.trust_remote_code else []


def server_args(spec: api.DatasetGenerationSpec, host: str = POD_IP, port: int | None = None,
                model_path: str | None = None, extra: list[str] | None = None) -> list[str]:
    """The generation server's flags (`sglang.launch_server`'s spellings); the pod's by default."""
    s = spec.server
    return ["--model-path", model_path or spec.model.checkpoint_path(), "--tp-size", str(s.tensor_parallel_size),
            "--host", host, "--port", str(s.port if port is None else port),
            "--context-length", str(spec.model.context_length), *model_args(spec),
            *(s.args if extra is None else extra)]


def generate_command(config_path: str, replica: int, server_url: str, metrics_address: str | None = None) -> list[str]:
    """`jobrunner generate` for one replica (the generation pod's command)."""
    return ["jobrunner", "generate", "--config", config_path, "--replica", str(replica), "--server-url", server_url,
            *(["--metrics-address", metrics_address] if metrics_address else [])]


def generation_job(name: str, spec: api.DatasetGenerationSpec, replica: int, settings: OperatorSettings,
                   config: dict) -> dict:
    """Replica `replica`'s Job: the SGLang server as a native sidecar beside `jobrunner generate`, on a
    GPU node of its own; with server.endpoint, the client alone, on the CPU stages' nodes."""
    s = spec.server
    if s.endpoint is not None:
        runner = generate_container(name, spec, replica, settings, s.endpoint.url, server_keys.endpoint_key_env(s.endpoint))
        pod_spec = {"serviceAccountName": names.service_account_name(name), **placement(spec, gpu=False),
                    "terminationGracePeriodSeconds": 30, "containers": [runner],
                    "volumes": _volumes(name, spec, model=True, config=config["metadata"]["name"], shm=False,
                                        inputs=True)}
        return _generation_job(name, spec, replica, settings, config, pod_spec)
    # Every start (a replica's, a group's restart, a resume) begins generating this long after SGLang
    # is ready at most: a real kubelet probes at this period (the local one every 0.2 s hides it).
    probe_period = 2
    server = {
        "name": "sglang", "image": s.image, "restartPolicy": "Always",  # a native sidecar
        "command": s.command, "args": [*server_args(spec), *server_keys.server_key_args(s.args)], "env": POD_IP_ENV,
        "securityContext": s.security_context.manifest(),
        "ports": [{"name": "http", "containerPort": s.port}],
        "resources": resources(s.resources, s.gpus_per_replica),
        # The port opens only after the weights load, and /ready answers only after warm-up;
        # a 1 TB checkpoint with graph capture can take most of the startup timeout.
        "startupProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": probe_period,
                         "timeoutSeconds": 5, "failureThreshold": math.ceil(s.startup_timeout_seconds / probe_period)},
        # /health runs a one-token generate with a 20 s timeout inside SGLang.
        "livenessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 30,
                          "timeoutSeconds": 25, "failureThreshold": 4},
        "volumeMounts": [{"name": "model", "mountPath": spec.model.mount_path, "readOnly": True},
                         {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    own_keys = not server_keys.user_keys(s.args)
    if own_keys:
        server["volumeMounts"].append({"name": "server-keys", "mountPath": names.KEYS_MOUNT, "readOnly": True})
    with_model_settings(server, spec)
    runner = generate_container(name, spec, replica, settings, f"http://{POD_IP}:{s.port}",
                                server_keys.client_key_env(name, s.args))
    pod_spec = {
        "serviceAccountName": names.service_account_name(name), **placement(spec, gpu=True),
        "terminationGracePeriodSeconds": 30,
        "initContainers": [server], "containers": [runner],
        "volumes": [*_volumes(name, spec, model=True, config=config["metadata"]["name"], shm=True, inputs=True),
                    *([server_keys.keys_volume(name)] if own_keys else [])],
    }
    pod_spec["affinity"] = one_per_node(name, pod_spec.get("affinity", {}))
    if not rank_group.is_group(spec):
        return _generation_job(name, spec, replica, settings, config, pod_spec)
    rank_group.group_pod(pod_spec, name, spec, names.generation_job_name(name, replica),
                         spec.runner_image or settings.runner_image)
    return rank_group.group_job(_generation_job(name, spec, replica, settings, config, pod_spec), s.nodes_per_replica)


def generate_container(name: str, spec: api.DatasetGenerationSpec, replica: int, settings: OperatorSettings,
                       server_url: str, key_env: list[dict]) -> dict:
    """`jobrunner generate` for one replica, talking to the server at `server_url`."""
    return {
        "name": "generate", "image": spec.runner_image or settings.runner_image,
        "command": generate_command(f"{names.CONFIG_MOUNT}/{names.GENERATE_CONFIG_KEY}", replica,
                                    server_url, f"{POD_IP}:{names.GENERATE_METRICS_PORT}"),
        "env": [*POD_IP_ENV, *OFFLINE_ENV, *key_env],
        "ports": [{"name": "metrics", "containerPort": names.GENERATE_METRICS_PORT}],
        "resources": resources(spec.server.generate_resources),
        "volumeMounts": [{"name": "data", "mountPath": names.DATA_MOUNT},
                         {"name": "config", "mountPath": names.CONFIG_MOUNT, "readOnly": True},
                         {"name": "model", "mountPath": spec.model.mount_path, "readOnly": True},
                         *inputs_mounts(spec)],
    }


def _generation_job(name: str, spec: api.DatasetGenerationSpec, replica: int, settings: OperatorSettings,
                    config: dict, pod_spec: dict) -> dict:
    job = _job(name, names.generation_job_name(name, replica), "generate", spec, settings, pod_spec,
               extra_labels={names.LABEL_REPLICA: str(replica)})
    job["metadata"]["annotations"] = {names.CONFIG_HASH_ANNOTATION: config_digest(config)}
    return job


def one_per_node(name: str, affinity: dict) -> dict:
    """The spec's affinity with one more required anti-affinity term: one generation pod per GPU
    node, so replicas never share a node's GPUs."""
    anti = dict(affinity.get("podAntiAffinity", {}))
    required = anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])
    anti["requiredDuringSchedulingIgnoredDuringExecution"] = [*required, {
        "labelSelector": {"matchLabels": labels(name, "generate")}, "topologyKey": "kubernetes.io/hostname"}]
    return {**affinity, "podAntiAffinity": anti}


def merge_command(name: str, spec: api.DatasetGenerationSpec) -> list[str]:
    """`jobrunner merge` for this spec (the merge Job's command)."""
    m, root = spec.merge, output_root(name, spec)
    return ["jobrunner", "merge", "--output-root", root, "--corpus-dir", f"{root}/corpus",
            "--truncated", m.truncated, "--seed", str(m.seed), "--eval-fraction", str(m.eval_fraction),
            "--shard-records", str(m.shard_records), "--dedupe" if m.dedupe else "--no-dedupe",
            "--draft-vocab-size", str(m.draft_vocab_size), "--model", spec.model.checkpoint_path(),
            *[a for kind in m.exports for a in ("--export", kind)]]


def extract_command(name: str, spec: api.DatasetGenerationSpec) -> list[str]:
    """`jobrunner extract` for this spec. transformers: the model spread over the pod's GPUs
    (device_map auto) when it has any, else on the CPU. sglang: run by the server's Python (its
    command without the launcher) with the server's tensor parallelism and its own flags."""
    e, root = spec.extraction, output_root(name, spec)
    common = ["--corpus", f"{root}/corpus", "--model", spec.model.checkpoint_path(),
              "--out", f"{root}/{names.HIDDEN_STATES_DIR}",
              "--dtype", e.dtype, "--final-state", e.final_state, "--max-len", str(e.max_length),
              "--too-long", e.too_long, "--shard-mb", str(e.shard_mb),
              "--drafters", ",".join(e.drafters), *(["--aux-layers", ",".join(map(str, e.layers))] if e.layers else []),
              *[a for kind in e.exports for a in ("--export", kind)]]
    if e.backend == "sglang":
        return [*sglang_python(spec.server.command), "-m", "jobrunner", "extract", *common, "--backend", "sglang",
                "--tp-size", str(spec.server.tensor_parallel_size),
                "--server-args", json.dumps([*model_args(spec), *spec.server.args])]
    return ["jobrunner", "extract", *common, *(["--device-map", "auto"] if e.gpus else []), *model_args(spec)]


def preflight_command(config_path: str, model_path: str, output: str | None = None) -> list[str]:
    """`jobrunner preflight` for this run (the preflight Job's command)."""
    return ["jobrunner", "preflight", "--config", config_path, "--model", model_path,
            *(["--output", output] if output else [])]


def preflight_job(name: str, spec: api.DatasetGenerationSpec, settings: OperatorSettings, config: dict) -> dict:
    """The CPU Job that checks the model, the tokenizer and the datasets before any GPU is asked for."""
    container = {
        "name": "preflight", "image": spec.runner_image or settings.runner_image,
        "command": preflight_command(f"{names.CONFIG_MOUNT}/{names.GENERATE_CONFIG_KEY}",
                                     spec.model.checkpoint_path()),
        "resources": resources(spec.preflight.resources),
        # A server that already runs is asked which model it serves, with its API key.
        "env": [*OFFLINE_ENV, *(server_keys.endpoint_key_env(spec.server.endpoint) if spec.server.endpoint else [])],
        "volumeMounts": [{"name": "data", "mountPath": names.DATA_MOUNT},
                         {"name": "config", "mountPath": names.CONFIG_MOUNT, "readOnly": True},
                         {"name": "model", "mountPath": spec.model.mount_path, "readOnly": True},
                         *inputs_mounts(spec)],
    }
    pod_spec = {"serviceAccountName": names.service_account_name(name), "containers": [container],
                "volumes": _volumes(name, spec, model=True, config=config["metadata"]["name"], shm=False,
                                    inputs=True), **placement(spec, gpu=False)}
    return _job(name, names.preflight_job_name(name), "preflight", spec, settings, pod_spec)


def merge_job(name: str, spec: api.DatasetGenerationSpec, settings: OperatorSettings) -> dict:
    m = spec.merge
    container = {
        "name": "merge", "image": spec.runner_image or settings.runner_image, "command": merge_command(name, spec),
        "resources": resources(m.resources),
        # The model for its config.json alone: the target's vocabulary size sizes the draft maps.
        "volumeMounts": [{"name": "data", "mountPath": names.DATA_MOUNT},
                         {"name": "model", "mountPath": spec.model.mount_path, "readOnly": True}],
    }
    # The merge only reads and writes the volumes: no API token in its pod.
    pod_spec = {"serviceAccountName": names.service_account_name(name), "automountServiceAccountToken": False,
                "containers": [container], "volumes": _volumes(name, spec, model=True, config=None, shm=False),
                **placement(spec, gpu=False)}
    return _job(name, names.merge_job_name(name), "merge", spec, settings, pod_spec)


def extract_job(name: str, spec: api.DatasetGenerationSpec, settings: OperatorSettings) -> dict:
    e = spec.extraction
    # Its progress (status.extraction, the estimate's measured rate) goes to its report ConfigMap:
    # the pod's token may read the run's DatasetGeneration and write its reports, nothing else.
    report = (["--report-configmap", names.extraction_report_name(name)]
              if settings.coordination == "kubernetes" else [])
    container = {
        "name": "extract", "image": spec.runner_image or settings.runner_image,
        "command": [*extract_command(name, spec), *report],
        "resources": resources(e.resources, e.gpus), "env": OFFLINE_ENV,
        "volumeMounts": [{"name": "data", "mountPath": names.DATA_MOUNT},
                         {"name": "model", "mountPath": spec.model.mount_path, "readOnly": True},
                         {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    with_model_settings(container, spec)
    pod_spec = {"serviceAccountName": names.service_account_name(name),
                "automountServiceAccountToken": bool(report),
                "containers": [container], "volumes": _volumes(name, spec, model=True, config=None, shm=True),
                **placement(spec, gpu=e.gpus > 0)}
    if e.backend == "sglang":
        with_sglang_image(container, pod_spec, spec.runner_image or settings.runner_image, spec.server.image,
                          spec.server.security_context.manifest())
    return _job(name, names.extract_job_name(name), "extract", spec, settings, pod_spec)


def with_sglang_image(container: dict, pod_spec: dict, runner_image: str, server_image: str,
                      server_context: dict) -> None:
    """The extraction container runs the server's image; an init container from draftgen's image
    copies jobrunner into an emptyDir that container imports it from (jobrunner.copy_code.cli)."""
    code = {"name": "jobrunner-code", "mountPath": names.CODE_MOUNT}
    pod_spec["initContainers"] = [{
        "name": "jobrunner-code", "image": runner_image, "command": ["jobrunner", "copy-code", names.CODE_MOUNT],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "volumeMounts": [code]}]
    pod_spec["volumes"].append({"name": "jobrunner-code", "emptyDir": {"sizeLimit": "256Mi"}})
    container.update(image=server_image, env=[*container["env"], {"name": "PYTHONPATH", "value": names.CODE_MOUNT}],
                     securityContext=dict(server_context))
    container["volumeMounts"].append({**code, "readOnly": True})


def output_lock(name: str, spec: api.DatasetGenerationSpec) -> dict:
    """The object that says which DatasetGeneration owns its output folder (docs/operator.md#one-run-per-output-folder):
    created before any Job, by whoever comes first (a create is atomic). It has no owner reference:
    like the data, it outlives the object, so no other run ever takes over the folder and mixes its
    records with the first one's. The owner is recorded by name, so an object deleted and
    re-created with the same name owns its folder (and resumes from its data) again."""
    folder = names.output_folder(spec.output.claim_name, spec.output.path or name)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": names.output_lock_name(spec.output.claim_name, spec.output.path or name),
                         "labels": labels(name, "output-lock", **{names.LABEL_OUTPUT_LOCK: "true"})},
            "data": {"owner": name, "folder": folder}}


def generation_network_policy(name: str, spec: api.DatasetGenerationSpec, settings: OperatorSettings) -> dict:
    """Ingress to the run's generation pods: the metrics port from the peers the chart names (and the
    server's port, for SGLang's /metrics, where the chart says so), and nothing else. Otherwise the
    server's port is reached only from inside its pod (generate talks to it over the pod's own IP,
    which a policy cannot block) and by the kubelet's probes (traffic from the node is always
    allowed). Where no controller enforces NetworkPolicy, the server's keys still hold."""
    peers = [json.loads(peer) for peer in settings.metrics_from]
    ports = [names.GENERATE_METRICS_PORT, *([spec.server.port] if settings.server_metrics else [])]
    rules = [{"from": peers, "ports": [{"protocol": "TCP", "port": p} for p in ports]}] if peers else []
    if rank_group.is_group(spec):  # the ranks of a group talk to each other on ports SGLang picks
        rules.append({"from": [{"podSelector": {"matchLabels": labels(name, "generate")}}]})
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": names.network_policy_name(name), "labels": labels(name, "generate-network")},
            "spec": {"podSelector": {"matchLabels": labels(name, "generate")}, "policyTypes": ["Ingress"],
                     "ingress": rules}}


def keys_secret(name: str, spec: api.DatasetGenerationSpec) -> dict | None:
    """The run's server keys, created (filled by whoever creates it) before the first generation
    Job; None when spec.server.args set the keys themselves, or the server is not draftgen's."""
    if spec.server.endpoint is not None or server_keys.user_keys(spec.server.args):
        return None
    return server_keys.keys_secret(name, labels(name, "keys"))


def ranks_service(name: str, spec: api.DatasetGenerationSpec) -> dict | None:
    """The headless Service of the run's rank groups; None unless its replicas span nodes."""
    if not rank_group.is_group(spec):
        return None
    return rank_group.ranks_service(name, labels(name, "ranks"), labels(name, "generate"))


def setup_objects(name: str, spec: api.DatasetGenerationSpec) -> list[dict]:
    """Objects that exist for the whole life of a DatasetGeneration, whatever its stage."""
    return [*rbac_objects(name, spec), *report_objects(name, spec)]
