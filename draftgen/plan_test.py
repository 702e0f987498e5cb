"""The plan's child objects, checked field by field (the API server checks them again in tests/operator)."""

import json

import yaml

from draftgen import api, plan
from draftgen_contracts import exit_codes, names
from draftgen_contracts.generate_config import CoordinationConfig
from draftgen_dev.builders import SpecBuilder
from jobrunner.shared.config import parse_config


def k25() -> SpecBuilder:
    return (SpecBuilder("k25").model(path="kimi-k2.5", chatTemplate={"enableThinking": True})
            .server(image="sglang:v0.5.23", args=["--mem-fraction-static", "0.88"]).replicas(2)
            .dataset("fc", 10_000_000, "prompts/fc.jsonl", samplingParams={"temperature": 0.6, "top_p": 0.95})
            .set(queueName="gpu-queue"))


SPEC = k25().spec()
SETTINGS = plan.OperatorSettings(runner_image="jobrunner:test", extra_pod_labels=(("extra", "yes"),))


def generation_pod(replica=0):
    config = plan.config_object("k25", "ml", SPEC, SETTINGS)
    return plan.generation_job("k25", SPEC, replica, SETTINGS, config), config


def test_generation_job_runs_sglang_as_a_native_sidecar_with_gpus_shm_and_probes():
    job, config = generation_pod(1)
    pod = job["spec"]["template"]["spec"]
    (server,) = pod["initContainers"]
    assert server["restartPolicy"] == "Always" and server["image"] == "sglang:v0.5.23"
    assert server["resources"]["limits"]["nvidia.com/gpu"] == "8"
    args = server["args"]
    assert args[args.index("--tp-size") + 1] == "8" and args[args.index("--model-path") + 1] == "/models/kimi-k2.5"
    assert args[-4:] == ["--mem-fraction-static", "0.88", "--config", f"{names.KEYS_MOUNT}/{names.KEYS_CONFIG_FILE}"]
    startup = server["startupProbe"]
    assert startup["httpGet"]["path"] == "/ready"
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 3600  # a 1 TB checkpoint's load fits
    assert startup["periodSeconds"] <= 2  # generation starts within 2 s of the server being ready
    assert server["livenessProbe"]["httpGet"]["path"] == "/health"
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Gi"}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in server["volumeMounts"]
    assert pod["tolerations"] == [api.GPU_TOLERATION] and pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["serviceAccountName"] == "k25-runner" and pod["restartPolicy"] == "Never"
    (runner,) = pod["containers"]
    assert runner["command"][:2] == ["jobrunner", "generate"] and "--replica" in runner["command"]
    assert runner["command"][runner["command"].index("--replica") + 1] == "1"
    assert job["metadata"]["name"] == "k25-gen-r001"
    assert job["spec"]["template"]["metadata"]["labels"]["extra"] == "yes"
    assert next(v for v in pod["volumes"] if v["name"] == "config")["configMap"]["name"] == config["metadata"]["name"]


def test_the_server_reads_the_runs_keys_from_its_secret_and_generate_gets_them_as_references():
    job, _ = generation_pod()
    pod = job["spec"]["template"]["spec"]
    (server,), (runner,) = pod["initContainers"], pod["containers"]
    volume = next(v for v in pod["volumes"] if v["name"] == "server-keys")
    assert volume["secret"]["secretName"] == names.keys_secret_name("k25") == plan.keys_secret("k25", SPEC)["metadata"]["name"]
    assert volume["secret"]["items"] == [{"key": names.KEYS_CONFIG_FILE, "path": names.KEYS_CONFIG_FILE}]
    assert {"name": "server-keys", "mountPath": names.KEYS_MOUNT, "readOnly": True} in server["volumeMounts"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in runner["env"] if "secretKeyRef" in e.get("valueFrom", {})}
    assert refs == {"DRAFTGEN_SERVER_API_KEY": {"name": "k25-server-keys", "key": "api-key"},
                    "DRAFTGEN_SERVER_ADMIN_API_KEY": {"name": "k25-server-keys", "key": "admin-api-key"}}
    assert "stringData" not in plan.keys_secret("k25", SPEC) and "data" not in plan.keys_secret("k25", SPEC)


def test_keys_the_user_sets_in_server_args_win_and_no_secret_is_made():
    spec = k25().server(image="sglang:v0.5.23", args=["--api-key", "mine", "--admin-api-key=theirs"]).spec()
    job = plan.generation_job("k25", spec, 0, SETTINGS, plan.config_object("k25", "ml", spec, SETTINGS))
    pod = job["spec"]["template"]["spec"]
    assert plan.keys_secret("k25", spec) is None and not any(v["name"] == "server-keys" for v in pod["volumes"])
    assert "--config" not in pod["initContainers"][0]["args"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert (env["DRAFTGEN_SERVER_API_KEY"], env["DRAFTGEN_SERVER_ADMIN_API_KEY"]) == ("mine", "theirs")


def test_the_network_policy_lets_only_the_named_peers_reach_the_metrics_port_and_nothing_the_server():
    closed = plan.generation_network_policy("k25", SPEC, SETTINGS)
    assert closed["spec"]["podSelector"] == {"matchLabels": plan.labels("k25", "generate")}
    assert closed["spec"]["policyTypes"] == ["Ingress"] and closed["spec"]["ingress"] == []  # nobody from outside
    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    opened = plan.generation_network_policy("k25", SPEC, plan.OperatorSettings(metrics_from=(json.dumps(monitoring),)))
    assert opened["spec"]["ingress"] == [{"from": [monitoring],
                                          "ports": [{"protocol": "TCP", "port": names.GENERATE_METRICS_PORT}]}]
    # With the chart's networkPolicy.serverMetrics, SGLang's own /metrics on the server's port too.
    server = plan.generation_network_policy("k25", SPEC, plan.OperatorSettings(metrics_from=(json.dumps(monitoring),),
                                                                              server_metrics=True))
    assert server["spec"]["ingress"][0]["ports"][1] == {"protocol": "TCP", "port": SPEC.server.port}


def every_container(pod: dict) -> list[dict]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def test_draftgens_containers_run_as_pod_security_restricted_asks_and_the_server_as_the_spec_says():
    config = plan.config_object("k25", "ml", SPEC, SETTINGS)
    sglang_extraction = k25().extraction(backend="sglang").spec()
    pods = {"generate": plan.generation_job("k25", SPEC, 0, SETTINGS, config), "preflight": plan.preflight_job(
        "k25", SPEC, SETTINGS, config), "merge": plan.merge_job("k25", SPEC, SETTINGS),
        "extract": plan.extract_job("k25", SPEC, SETTINGS), "sglang-extract": plan.extract_job("k25", sglang_extraction,
                                                                                            SETTINGS)}
    for kind, job in pods.items():
        pod = job["spec"]["template"]["spec"]
        for c in every_container(pod):
            if c["image"] == SPEC.server.image:  # the server, and the SGLang extraction
                assert c["securityContext"] == api.SERVER_SECURITY_CONTEXT, (kind, c["name"])
                continue
            context = c["securityContext"]
            assert context["runAsNonRoot"] and context["runAsUser"] == 65532 and context["readOnlyRootFilesystem"]
            assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, (kind, c["name"])
            assert {"name": "scratch", "mountPath": "/tmp"} in c["volumeMounts"]
            assert {"name": "HOME", "value": "/tmp"} in c["env"]
        assert pod["securityContext"] == {"fsGroup": 65532, "fsGroupChangePolicy": "OnRootMismatch"}, kind
        # Only the pods that report through the API server hold a token (the merge writes only files).
        assert pod.get("automountServiceAccountToken", True) is (kind != "merge"), kind
    mine = {"runAsNonRoot": True, "runAsUser": 1000, **api.SERVER_SECURITY_CONTEXT}
    job = plan.generation_job("k25", k25().server(image="sglang:v0.5.23", securityContext=mine).spec(), 0, SETTINGS,
                              config)
    assert job["spec"]["template"]["spec"]["initContainers"][0]["securityContext"] == mine


def test_replicas_never_share_a_node():
    job, _ = generation_pod()
    term = job["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == {names.LABEL_NAME: "k25", names.LABEL_COMPONENT: "generate"}


def test_config_errors_and_a_full_volume_fail_fast_and_disruptions_do_not_count():
    job, _ = generation_pod()
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [exit_codes.BAD_CONFIG]}}
    # Index 1, as reasons.pod_failure_policy(..., rule=1) words it for the local runner.
    assert rules[1] == {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [exit_codes.VOLUME_FULL]}}
    assert rules[2]["action"] == "Ignore" and rules[2]["onPodConditions"][0]["type"] == "DisruptionTarget"


def test_gpu_jobs_queue_in_the_gpu_queue_cpu_jobs_in_theirs_and_none_is_created_suspended():
    """Kueue's webhook suspends a labelled Job itself; one created suspended would never run without Kueue.
    A CPU Job in the GPU queue would wait for GPU quota, or for good on a GPU flavor whose nodeLabels
    contradict cpuStages.nodeSelector: it goes in cpuStages.queueName, or in none."""
    job, config = generation_pod()
    assert job["metadata"]["labels"][names.KUEUE_QUEUE_LABEL] == "gpu-queue" and "suspend" not in job["spec"]
    assert plan.extract_job("k25", SPEC, SETTINGS)["metadata"]["labels"][names.KUEUE_QUEUE_LABEL] == "gpu-queue"
    cpu_jobs = lambda spec: (plan.preflight_job("k25", spec, SETTINGS, config), plan.merge_job("k25", spec, SETTINGS),  # noqa: E731
                             plan.extract_job("k25", spec.model_copy(update={"extraction": spec.extraction.model_copy(
                                 update={"gpus": 0})}), SETTINGS))
    assert all(names.KUEUE_QUEUE_LABEL not in j["metadata"]["labels"] for j in cpu_jobs(SPEC))
    queued = k25().set(cpuStages={"queueName": "cpu-queue"}).spec()
    for job in cpu_jobs(queued):
        assert job["metadata"]["labels"][names.KUEUE_QUEUE_LABEL] == "cpu-queue" and "suspend" not in job["spec"]


def test_sglang_extraction_runs_jobrunner_with_the_servers_image_python_parallelism_and_flags():
    spec = k25().extraction(backend="sglang", finalState="pre-norm", layers=[1, 30, 57]).spec()
    pod = plan.extract_job("k25", spec, SETTINGS)["spec"]["template"]["spec"]
    (copier,) = pod["initContainers"]
    (extract,) = pod["containers"]
    assert copier["image"] == "jobrunner:test" and copier["command"] == ["jobrunner", "copy-code", names.CODE_MOUNT]
    assert extract["image"] == "sglang:v0.5.23" and extract["resources"]["limits"]["nvidia.com/gpu"] == "8"
    command = extract["command"]
    assert command[:4] == ["python3", "-m", "jobrunner", "extract"]  # the server's command, launcher replaced
    assert command[command.index("--tp-size") + 1] == "8" and command[command.index("--backend") + 1] == "sglang"
    assert command[command.index("--server-args") + 1] == '["--mem-fraction-static", "0.88"]'
    assert command[command.index("--aux-layers") + 1] == "1,30,57" and "--device-map" not in command
    assert {"name": "PYTHONPATH", "value": names.CODE_MOUNT} in extract["env"]
    code = next(v for v in pod["volumes"] if v["name"] == "jobrunner-code")
    assert "emptyDir" in code and {"name": "jobrunner-code", "mountPath": names.CODE_MOUNT} in copier["volumeMounts"]
    assert {"name": "jobrunner-code", "mountPath": names.CODE_MOUNT, "readOnly": True} in extract["volumeMounts"]


def test_transformers_extraction_runs_in_draftgens_image_over_the_pods_gpus():
    pod = plan.extract_job("k25", SPEC, SETTINGS)["spec"]["template"]["spec"]
    (extract,) = pod["containers"]
    assert "initContainers" not in pod and extract["image"] == "jobrunner:test"
    assert extract["command"][:2] == ["jobrunner", "extract"] and "--device-map auto" in " ".join(extract["command"])


def test_trusting_the_models_code_reaches_every_pod_that_loads_it_from_the_one_field():
    trusted = k25().model(path="kimi-k2.5", trustRemoteCode=True)
    spec = trusted.spec()
    server = plan.generation_job("k25", spec, 0, SETTINGS, plan.config_object("k25", "ml", spec, SETTINGS))
    (sidecar,) = server["spec"]["template"]["spec"]["initContainers"]
    assert sidecar["args"].count("--trust-remote-code") == 1
    assert plan.generate_config(spec, server_url="http://x", output_root="/data/k25", run_id="k25",
                                coordination=CoordinationConfig(), progress_interval_s=5).trust_remote_code
    (extract,) = plan.extract_job("k25", spec, SETTINGS)["spec"]["template"]["spec"]["containers"]
    assert "--trust-remote-code" in extract["command"]
    sglang = plan.extract_command("k25", trusted.extraction(backend="sglang").spec())
    assert json.loads(sglang[sglang.index("--server-args") + 1])[0] == "--trust-remote-code"
    untrusted = plan.extract_job("k25", SPEC, SETTINGS)["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "--trust-remote-code" not in untrusted and "--trust-remote-code" not in generation_pod()[0]["spec"][
        "template"]["spec"]["initContainers"][0]["args"]


def test_the_inputs_volume_is_mounted_read_only_where_datasets_are_read_and_nowhere_else():
    spec = k25().set(inputs={"claimName": "prompt-library"}).spec()
    config = plan.config_object("k25", "ml", spec, SETTINGS)
    generation = plan.generation_job("k25", spec, 0, SETTINGS, config)["spec"]["template"]["spec"]
    preflight = plan.preflight_job("k25", spec, SETTINGS, config)["spec"]["template"]["spec"]
    mount = {"name": "inputs", "mountPath": "/inputs", "readOnly": True}
    for pod, reader in ((generation, "generate"), (preflight, "preflight")):
        assert {"name": "inputs", "persistentVolumeClaim": {"claimName": "prompt-library", "readOnly": True}} in pod[
            "volumes"]
        (container,) = [c for c in pod["containers"] if c["name"] == reader]
        assert mount in container["volumeMounts"]
    assert mount not in generation["initContainers"][0]["volumeMounts"]  # the server reads no prompt
    for job in (plan.merge_job("k25", spec, SETTINGS), plan.extract_job("k25", spec, SETTINGS)):
        assert all(v["name"] != "inputs" for v in job["spec"]["template"]["spec"]["volumes"])
    generate = plan.generate_config(spec, server_url="http://x", output_root="/data/k25", run_id="k25",
                                    coordination=CoordinationConfig(), progress_interval_s=5)
    assert generate.input_roots == ["/data", "/inputs", "/models"]
    assert all(v["name"] != "inputs" for v in generation_pod()[0]["spec"]["template"]["spec"]["volumes"])


def test_every_pod_of_a_run_carries_the_operators_pull_secrets_then_the_specs_each_once():
    spec = k25().set(imagePullSecrets=[{"name": "mirror"}, {"name": "team"}]).extraction(backend="sglang").spec()
    settings = plan.OperatorSettings(runner_image="jobrunner:test", image_pull_secrets=("mirror", "cluster"))
    config = plan.config_object("k25", "ml", spec, settings)
    jobs = [plan.preflight_job("k25", spec, settings, config), plan.generation_job("k25", spec, 0, settings, config),
            plan.merge_job("k25", spec, settings), plan.extract_job("k25", spec, settings)]
    for job in jobs:
        assert job["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "mirror"}, {"name": "cluster"},
                                                                       {"name": "team"}]
    assert "imagePullSecrets" not in generation_pod()[0]["spec"]["template"]["spec"]  # none asked, none set


def test_rendered_generate_config_is_a_valid_jobrunner_config():
    _, config = generation_pod()
    parsed = parse_config(yaml.safe_load(config["data"][names.GENERATE_CONFIG_KEY]))
    assert parsed.replicas == 2 and parsed.output_root == "/data/k25"
    assert parsed.tokenizer_path == "/models/kimi-k2.5"
    assert parsed.chat_template_kwargs == {"enable_thinking": True, "thinking": True}
    assert parsed.datasets[0].path == "/data/prompts/fc.jsonl" and parsed.datasets[0].budget_tokens == 10_000_000
    assert parsed.datasets[0].sampling_params == {"temperature": 0.6, "top_p": 0.95}
    assert [c.name for c in parsed.prompt_classes] == ["short", "long"]
    assert parsed.startup_timeout_s == SPEC.server.startup_timeout_seconds
    assert parsed.coordination.kind == "kubernetes" and parsed.coordination.namespace == "ml"


def test_the_config_the_plan_builds_is_the_one_jobrunner_reads_back():
    built = plan.generate_config(SPEC, server_url="http://localhost:30000", output_root="/data/k25", run_id="k25",
                                 coordination=CoordinationConfig(kind="kubernetes", name="k25", namespace="ml"),
                                 progress_interval_s=plan.REPORT_INTERVAL_S)
    _, config = generation_pod()
    assert parse_config(yaml.safe_load(config["data"][names.GENERATE_CONFIG_KEY])) == built


def test_a_runner_without_an_api_server_gets_a_config_that_coordinates_through_files():
    local = plan.config_object("k25", "ml", SPEC, plan.OperatorSettings(coordination="file"))
    parsed = parse_config(yaml.safe_load(local["data"][names.GENERATE_CONFIG_KEY]))
    assert parsed.coordination == CoordinationConfig(kind="file") and parsed.output_root == "/data/k25"
    assert local["metadata"]["name"] != generation_pod()[1]["metadata"]["name"]


def test_config_name_changes_with_its_content():
    _, before = generation_pod()
    raised = SPEC.model_copy(deep=True)
    raised.datasets[0].budget_tokens += 1
    after = plan.config_object("k25", "ml", raised, SETTINGS)
    assert before["metadata"]["name"] != after["metadata"]["name"]


def test_role_allows_only_own_reports_and_own_object():
    role = next(o for o in plan.rbac_objects("k25", SPEC) if o["kind"] == "Role")
    assert {tuple(r["resourceNames"]) for r in role["rules"]} == {("k25",), ("k25-report-r000", "k25-report-r001",
                                                                           "k25-preflight")}
    assert all("create" not in r["verbs"] and "list" not in r["verbs"] for r in role["rules"])
    extracting = next(o for o in plan.rbac_objects("k25", k25().extraction().spec()) if o["kind"] == "Role")
    assert extracting["rules"][1]["resourceNames"][-1] == "k25-extraction"


def test_the_extraction_reports_its_progress_into_its_own_configmap_in_a_cluster_and_a_file_locally():
    spec = k25().extraction().spec()
    report = next(o for o in plan.report_objects("k25", spec) if o["metadata"]["name"] == "k25-extraction")
    assert report["metadata"]["labels"][names.LABEL_EXTRACTION] == "true"
    assert "k25-extraction" not in str(plan.report_objects("k25", SPEC))  # extraction off: no report
    pod = plan.extract_job("k25", spec, SETTINGS)["spec"]["template"]["spec"]
    command = pod["containers"][0]["command"]
    assert command[command.index("--report-configmap") + 1] == "k25-extraction"
    assert pod["automountServiceAccountToken"] is True
    local = plan.extract_job("k25", spec, plan.OperatorSettings(coordination="file"))["spec"]["template"]["spec"]
    assert "--report-configmap" not in local["containers"][0]["command"]
    assert local["automountServiceAccountToken"] is False


def test_every_child_name_fits_for_the_longest_allowed_name():
    name = "n" * names.MAX_NAME_LENGTH
    children = [names.generation_job_name(name, 63), names.report_name(name, 63), names.merge_job_name(name),
             names.extract_job_name(name), names.service_account_name(name), names.config_map_name(name, "0123456789"),
             names.preflight_report_name(name), names.extraction_report_name(name)]
    assert all(len(n) <= 63 for n in children)
    assert len(names.generation_job_name(name, 63)) + 6 <= 63  # the Job's pods add "-xxxxx"


def test_the_preflight_job_checks_on_the_cpu_with_the_config_the_model_and_the_data():
    config = plan.config_object("k25", "ml", SPEC, SETTINGS)
    job = plan.preflight_job("k25", SPEC, SETTINGS, config)
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["command"] == ["jobrunner", "preflight", "--config", f"{names.CONFIG_MOUNT}/generate.yaml",
                                    "--model", "/models/kimi-k2.5"]
    assert "nvidia.com/gpu" not in str(container["resources"]) and "nodeSelector" not in pod
    assert {m["name"] for m in container["volumeMounts"]} == {"data", "config", "model", "scratch"}
    assert job["metadata"]["labels"][names.LABEL_COMPONENT] == "preflight"
    assert job["spec"]["backoffLimit"] == exit_codes.BACKOFF_LIMITS["preflight"]


# What a GPU cluster's pods need beyond draftgen's own settings (issue 42, item 5).
CLUSTER_SETTINGS = dict(
    pods={"annotations": {"cost-center": "ml-42"}, "labels": {"team": "drafters"}, "priorityClassName": "batch-high",
          "volumes": [{"name": "nvme", "hostPath": {"path": "/mnt/nvme", "type": "Directory"}},
                      {"name": "unused", "emptyDir": {}}]},
    cpuStages={"nodeSelector": {"pool": "cpu"}, "tolerations": [{"key": "spot", "operator": "Exists"}]},
    preflight={"resources": {"requests": {"cpu": 3, "memory": "5Gi"}}},
    merge={"resources": {"requests": {"cpu": "4"}, "limits": {"memory": "16Gi"}}},
)


def cluster_spec(extraction_gpus: int = 8) -> api.DatasetGenerationSpec:
    spec = k25().set(**CLUSTER_SETTINGS).extraction(True).obj()["spec"]
    spec["server"].update(
        env=[{"name": "NCCL_IB_DISABLE", "value": "1"},
             {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}],
        volumeMounts=[{"name": "nvme", "mountPath": "/cache"}],
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu.product", "operator": "In", "values": ["RTX-PRO-6000"]}]}]}}},
        resources={"requests": {"memory": "900Gi"}}, generateResources={"requests": {"cpu": "1"}})
    spec["extraction"].update(gpus=extraction_gpus, resources={"requests": {"cpu": "16"}})
    if extraction_gpus == 0:
        spec["server"]["tensorParallelSize"] = spec["server"]["gpusPerReplica"] = 1
    return api.DatasetGenerationSpec.model_validate(spec)


def every_pod(spec: api.DatasetGenerationSpec) -> dict[str, dict]:
    config = plan.config_object("k25", "ml", spec, SETTINGS)
    jobs = {"generate": plan.generation_job("k25", spec, 0, SETTINGS, config),
            "preflight": plan.preflight_job("k25", spec, SETTINGS, config),
            "merge": plan.merge_job("k25", spec, SETTINGS), "extract": plan.extract_job("k25", spec, SETTINGS)}
    return {component: job["spec"]["template"] for component, job in jobs.items()}


def test_every_pod_carries_the_specs_annotations_labels_and_priority_class_with_draftgens_labels_kept():
    for component, template in every_pod(cluster_spec()).items():
        assert template["metadata"]["annotations"] == {"cost-center": "ml-42"}, component
        assert template["metadata"]["labels"]["team"] == "drafters", component
        assert template["metadata"]["labels"][names.LABEL_COMPONENT] == component
        assert template["spec"]["priorityClassName"] == "batch-high", component


def test_the_gpu_pods_and_the_cpu_pods_are_placed_apart():
    pods = every_pod(cluster_spec())
    for component in ("preflight", "merge"):
        pod = pods[component]["spec"]
        assert pod["nodeSelector"] == {"pool": "cpu"} and pod["tolerations"] == [{"key": "spot", "operator": "Exists"}]
        assert "affinity" not in pod
    for component in ("generate", "extract"):
        pod = pods[component]["spec"]
        assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"} and pod["tolerations"] == [api.GPU_TOLERATION]
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms[0]["matchExpressions"][0]["values"] == ["RTX-PRO-6000"]
    # The generation pods keep their one-per-node anti-affinity beside the spec's node affinity.
    anti = pods["generate"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti == [{"labelSelector": {"matchLabels": plan.labels("k25", "generate")},
                     "topologyKey": "kubernetes.io/hostname"}]
    # An extraction on the CPU goes where the CPU stages go.
    assert every_pod(cluster_spec(extraction_gpus=0))["extract"]["spec"]["nodeSelector"] == {"pool": "cpu"}


def test_every_container_has_the_resources_the_spec_gives_it():
    pods = every_pod(cluster_spec())
    server, = pods["generate"]["spec"]["initContainers"]
    generate, = pods["generate"]["spec"]["containers"]
    assert server["resources"] == {"requests": {"memory": "900Gi"}, "limits": {"nvidia.com/gpu": "8"}}
    assert generate["resources"] == {"requests": {"cpu": "1"}}
    assert pods["preflight"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "3", "memory": "5Gi"}}
    assert pods["merge"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "4"}, "limits": {"memory": "16Gi"}}
    assert pods["extract"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "16"},
                                                                     "limits": {"nvidia.com/gpu": "8"}}
    # Unset, each keeps the default it had when it was not a field.
    defaults = every_pod(k25().extraction(True).spec())
    assert defaults["preflight"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "8Gi"}}
    assert defaults["generate"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "2", "memory": "8Gi"}}


def test_the_server_env_and_mounts_reach_the_containers_that_load_the_model_and_only_their_pods_get_the_volume():
    pods = every_pod(cluster_spec())
    server, = pods["generate"]["spec"]["initContainers"]
    extract, = pods["extract"]["spec"]["containers"]
    for container in (server, extract):
        assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}} in container["env"]
        assert {"name": "nvme", "mountPath": "/cache"} in container["volumeMounts"]
    assert server["env"][0]["name"] == "POD_IP"  # draftgen's first: the server's own --host
    for component, template in pods.items():
        volumes = [v["name"] for v in template["spec"]["volumes"]]
        assert ("nvme" in volumes) == (component in ("generate", "extract")), (component, volumes)
        assert "unused" not in volumes
    nvme = next(v for v in pods["generate"]["spec"]["volumes"] if v["name"] == "nvme")
    assert nvme == {"name": "nvme", "hostPath": {"path": "/mnt/nvme", "type": "Directory"}}


def test_a_server_that_already_runs_gets_clients_alone_on_the_cpu_stages_with_the_users_key_secrets():
    endpoint = {"url": "http://sglang.serving.svc:30000", "adminApiKey": {"name": "sglang-keys", "key": "admin"}}
    spec = k25().server(image=None, endpoint=endpoint).spec()
    job = plan.generation_job("k25", spec, 1, SETTINGS, plan.config_object("k25", "ml", spec, SETTINGS))
    pod = job["spec"]["template"]["spec"]
    assert "initContainers" not in pod and [c["name"] for c in pod["containers"]] == ["generate"]
    (runner,) = pod["containers"]
    command = runner["command"]
    assert command[command.index("--server-url") + 1] == "http://sglang.serving.svc:30000"
    assert command[command.index("--replica") + 1] == "1"
    assert not any("nvidia.com/gpu" in str(c.get("resources")) for c in pod["containers"])
    assert "tolerations" not in pod and "affinity" not in pod  # no GPU node, no one-per-node rule
    assert "dshm" not in {v["name"] for v in pod["volumes"]} and {"data", "model", "config"} <= {v["name"] for v in pod["volumes"]}
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in runner["env"] if "secretKeyRef" in e.get("valueFrom", {})}
    assert refs == {"DRAFTGEN_SERVER_ADMIN_API_KEY": {"name": "sglang-keys", "key": "admin"}}
    assert plan.keys_secret("k25", spec) is None  # the server's keys are its owner's
