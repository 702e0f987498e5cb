"""A valid manifest to start from, and the manifests admission refuses, each with the field its message
names: one table both executors are held to (the API server in tests/operator/test_admission.py,
`draftgen run` in tests/local_run/test_admission_rules.py)."""

from __future__ import annotations

from draftgen_dev.builders import SpecBuilder


def manifest(name: str = "demo", **spec_overrides) -> dict:
    """A valid DatasetGeneration of two datasets on two replicas."""
    return (SpecBuilder(name).replicas(2).server(image="example.invalid/sglang:v0.5.23").model(path="tiny")
            .dataset("chat", 4000, "prompts/chat.jsonl").dataset("code", 3000, "prompts/code.jsonl")
            .set(**spec_overrides).obj())


def with_dataset(**fields):
    m = manifest()
    m["spec"]["datasets"][0].update(fields)
    return m


def with_server(**fields):
    m = manifest()
    m["spec"]["server"].update(fields)
    return m


def with_endpoint(url: str = "http://sglang.serving.svc:30000", nodes_per_replica: int = 1, **spec_overrides):
    """A server that already runs in place of the image (server.endpoint)."""
    m = manifest(**spec_overrides)
    del m["spec"]["server"]["image"]
    if nodes_per_replica != 1:
        m["spec"]["server"]["nodesPerReplica"] = nodes_per_replica
    m["spec"]["server"]["endpoint"] = {"url": url, "adminApiKey": {"name": "sglang-keys", "key": "admin"}}
    return m


def multi_node(name: str = "demo", extraction=None, **server):
    """Each replica across two 8-GPU nodes, SGLang's tensor parallelism over all 16 GPUs."""
    m = manifest(name, **({"extraction": extraction} if extraction else {}))
    m["spec"]["server"].update({"nodesPerReplica": 2, "gpusPerReplica": 8, "tensorParallelSize": 16, **server})
    return m


def with_inputs(dataset_path: str, **inputs):
    """The first dataset at `dataset_path`, with a volume of prompt files (spec.inputs)."""
    m = with_dataset(path=dataset_path)
    m["spec"]["inputs"] = {"claimName": "library", **inputs}
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
    "both a server image and an endpoint": (with_server(endpoint={"url": "http://sglang:30000"}), "spec.server.image"),
    "an endpoint that is not a URL": (with_endpoint(url="sglang:30000"), "spec.server.endpoint.url"),
    "an endpoint with the SGLang extraction backend": (with_endpoint(extraction={"backend": "sglang"}),
                                                       "spec.server.endpoint"),
    "a replica across nodes of a server that already runs": (with_endpoint(nodes_per_replica=2),
                                                             "spec.server.nodesPerReplica"),
    "a replica across nodes with the SGLang extraction backend": (
        multi_node(extraction={"enabled": True, "backend": "sglang", "gpus": 16}), "spec.server.nodesPerReplica"),
    "a replica's GPUs that tp does not divide": (multi_node(tensorParallelSize=32), "spec.server.gpusPerReplica"),
    "a replica across nodes under a dotted name": (multi_node(name="team.run"), "metadata.name: with server.nodesPerReplica"),
    "a replica across nodes under a name starting with a digit": (multi_node(name="1run"), "metadata.name: with server."),
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
    "int8 dtype": (manifest(extraction={"dtype": "int8"}), "spec.extraction.dtype"),
    "a speculators export of post-norm states": (manifest(extraction={"exports": ["speculators"]}),
                                                 "spec.extraction.exports"),
    "mtp alone, with no layer to capture besides": (manifest(extraction={"drafters": ["mtp"]}),
                                                    "spec.extraction.drafters"),
    "an unknown drafter": (manifest(extraction={"drafters": ["medusa"]}), "spec.extraction.drafters[0]"),
    "a specforge export of mtp states (SpecForge trains no MTP)": (
        manifest(extraction={"drafters": ["mtp"], "layers": [3], "exports": ["specforge"]}), "spec.extraction.exports"),
    "an unknown extraction backend": (manifest(extraction={"backend": "vllm"}), "spec.extraction.backend"),
    "sglang extraction with a server that is not SGLang's launcher": (
        manifest(server={"image": "x", "command": ["jobrunner", "simulate"]}, extraction={"backend": "sglang"}),
        "spec.extraction.backend"),
    "sglang extraction on fewer GPUs than the server's ranks": (
        manifest(extraction={"backend": "sglang", "gpus": 4}), "spec.extraction.gpus"),
    "sglang extraction on the CPU with eight ranks": (
        manifest(extraction={"backend": "sglang", "gpus": 0}), "spec.extraction.gpus"),
    "an unknown corpus export": (manifest(merge={"exports": ["csv"]}), "spec.merge.exports[0]"),
    "cut responses that the merge would drop": (manifest(merge={"truncated": "drop"}), "spec.atBudget"),
    "an unknown end at the budget": (manifest(atBudget="finish"), "spec.atBudget"),
    "no output volume": (without("spec.output"), "spec.output"),
    "zero sample cap": (with_dataset(sampleCap=0), "spec.datasets[0].sampleCap"),
    "unknown spec field": (manifest(budget=5), "spec.budget"),
    "class max new tokens at the context length": (
        manifest(model={"claimName": "models", "path": "tiny", "contextLength": 2048},
                 promptClasses=[{"name": "all", "concurrency": 1, "maxNewTokens": 2048}]), "spec.promptClasses"),
    "default classes beyond a small context": (
        manifest(model={"claimName": "models", "path": "tiny", "contextLength": 4096}), "spec.promptClasses"),
    "dataset max new tokens over the context length": (
        manifest(model={"claimName": "models", "path": "tiny", "contextLength": 2048},
                 promptClasses=[{"name": "all", "concurrency": 1, "maxNewTokens": 100}],
                 datasets=[{"name": "a", "path": "x", "budgetTokens": 1, "maxNewTokens": 4096}]), "spec.datasets"),
    "output path climbing out": (manifest(output={"claimName": "data", "path": "runs/../../etc"}), "spec.output.path"),
    "dataset path climbing out": (with_dataset(path="../other-run/prompts.jsonl"), "spec.datasets"),
    "dataset path absolute outside the volumes": (with_dataset(path="/var/run/secrets/kubernetes.io/serviceaccount/token"),
                                                  "spec.datasets"),
    "dataset path absolute beside the model volume": (with_dataset(path="/models-old/prompts.jsonl"), "spec.datasets"),
    "model path climbing out": (manifest(model={"claimName": "models", "path": "tiny/.."}), "spec.model.path"),
    "queue name with a space": (manifest(queueName="gpu batch"), "spec.queueName"),
    "queue name in capitals": (manifest(queueName="GPU"), "spec.queueName"),
    "claim name not a DNS name": (manifest(output={"claimName": "My_Data"}), "spec.output.claimName"),
    "server flag draftgen sets": (with_server(args=["--tp-size", "4"]), "spec.server.args"),
    "server flag draftgen sets, with =": (with_server(args=["--port=31000"]), "spec.server.args"),
    "a server config file (the keys come in draftgen's)": (with_server(args=["--config", "/etc/s.yaml"]),
                                                           "spec.server.args"),
    "fields naming no column": (with_dataset(fields={}), "spec.datasets"),
    "fields naming both prompt and messages": (with_dataset(fields={"prompt": "q", "messages": "turns"}),
                                               "spec.datasets"),
    "fields naming one column twice": (with_dataset(fields={"prompt": "q", "system": "q"}), "spec.datasets"),
    "fields of text on a pretokenized dataset": (with_dataset(pretokenized=True, fields={"prompt": "q"}),
                                                 "spec.datasets"),
    "an inputs path without inputs": (with_dataset(path="/inputs/a.jsonl"), "spec.datasets"),
    "inputs mounted over the data volume": (with_inputs("a.jsonl", mountPath="/data/"), "spec.inputs.mountPath"),
    "inputs mounted at the model's path": (with_inputs("a.jsonl", mountPath="/models"), "spec.inputs.mountPath"),
    "a dataset outside the inputs mount": (with_inputs("/inputsx/a.jsonl"), "spec.datasets"),
    "a prompt column for traces": (with_dataset(kind="traces", fields={"prompt": "q"}), "spec.datasets"),
    "remote code asked of the server alone (model.trustRemoteCode says it for every pod)": (
        with_server(args=["--trust-remote-code"]), "spec.server.args"),
    "node selector value not a label value": (with_server(nodeSelector={"gpu": "rtx pro"}), "spec.server.nodeSelector"),
    # Found by the generated differential test (tests/operator/test_admission_differential.py):
    "an integer written 1.0": (with_server(tensorParallelSize=8.0), "spec.server.tensorParallelSize"),
    "an integer beyond 64 bits": (with_dataset(budgetTokens=2**63), "spec.datasets[0].budgetTokens"),
    "a corpus export twice": (manifest(merge={"exports": ["hf-parquet", "hf-parquet"]}), "spec.merge.exports[1]"),
    "a state export twice": (manifest(extraction={"exports": ["specforge", "specforge"]}), "spec.extraction.exports[1]"),
    "a bad name and an unknown field": ({**with_dataset(bogus=1), "metadata": {"name": "-a"}}, "spec.datasets[0].bogus"),
    "a quantity that is not one": (with_server(shmSize="1e"), "spec.server.shmSize"),
    # The pods' Kubernetes types, as Kubernetes types them (docs/pods.md):
    "resources with a typo": (with_server(resources={"request": {"cpu": "2"}}), "spec.server.resources.request"),
    "a resource that is not a quantity": (manifest(merge={"resources": {"limits": {"memory": "lots"}}}),
                                          "spec.merge.resources.limits"),
    "a toleration operator that does not exist": (with_server(tolerations=[{"key": "a", "operator": "Is"}]),
                                                  "spec.server.tolerations[0].operator"),
    "a securityContext typo": (with_server(securityContext={"runAsUSer": 1}), "spec.server.securityContext.runAsUSer"),
    "an affinity term without its topology key": (
        with_server(affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}}),
        "spec.server.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"),
    "an env value and a valueFrom": (with_server(env=[{"name": "A", "value": "1", "valueFrom": {
        "secretKeyRef": {"name": "s", "key": "k"}}}]), "spec.server.env"),
    "the server's POD_IP set by the spec": (with_server(env=[{"name": "POD_IP", "value": "0.0.0.0"}]), "spec.server.env"),
    "a pod label of draftgen's": (manifest(pods={"labels": {"draftgen.io/name": "x"}}), "spec.pods.labels"),
    "a volume without a source": (manifest(pods={"volumes": [{"name": "cache"}]}), "spec.pods.volumes"),
    "a volume named as one of draftgen's": (manifest(pods={"volumes": [{"name": "data", "emptyDir": {}}]}),
                                            "spec.pods.volumes"),
    "a mount of no declared volume": (with_server(volumeMounts=[{"name": "cache", "mountPath": "/cache"}]),
                                      "spec.server.volumeMounts"),
    "a mount over draftgen's shared memory": (
        {**with_server(volumeMounts=[{"name": "cache", "mountPath": "/dev/shm"}]),
         "spec": {**with_server(volumeMounts=[{"name": "cache", "mountPath": "/dev/shm"}])["spec"],
                  "pods": {"volumes": [{"name": "cache", "emptyDir": {}}]}}}, "spec.server.volumeMounts"),
    "a priority class that is not a name": (manifest(pods={"priorityClassName": "High Priority"}),
                                            "spec.pods.priorityClassName"),
}

# Manifests both accept that a hand-written rule once refused (found by the same test).
VALID = {
    "a quantity with no number (0, as apimachinery parses it)": with_server(shmSize="Gi"),
    "a null field is an absent one (the API server prunes it, then defaults)": manifest(
        extraction={"resources": None}, merge={"dedupe": None}, runnerImage=None),
    "a shard set with its columns named": with_dataset(path="hf/data/train-*.parquet", format="parquet",
                                                       fields={"prompt": "problem", "system": "sys", "id": "uid"}),
    "a dataset on the inputs volume": with_inputs("/library/hf/data/*.parquet", mountPath="/library"),
    "a per-dataset chat template": with_dataset(chatTemplate={"enableThinking": True, "kwargs": {"x": 1}}),
    "a null quantity is an absent one (the API server prunes it)": manifest(merge={"resources": {
        "requests": {"cpu": None, "memory": "2Gi"}}}),
    "SpecForge's DFlash and speculators from one pre-norm extraction (SpecForge's DFlash reads no final state)":
        manifest(extraction={"drafters": ["dflash", "mtp"], "finalState": "pre-norm",
                             "exports": ["specforge", "speculators"]}),
    "a server that already runs, with its keys in a Secret": with_endpoint(),
    "a replica across two nodes, tp over both": multi_node(),
    "a replica across two nodes, pipeline parallel across them": multi_node(tensorParallelSize=8,
                                                                            args=["--pp-size", "2"]),
    "a dotted name on one node": manifest(name="team.run"),
    "quantities as Kubernetes takes them, numbers too": manifest(merge={"resources": {
        "requests": {"cpu": 2, "memory": "2Gi"}, "limits": {"cpu": "1500m", "memory": 4_000_000_000}}}),
}


def with_absolute_dataset_paths():
    """Valid: absolute dataset paths in the data volume and in the model volume."""
    m = manifest("absolute")
    m["spec"]["datasets"][0]["path"] = "/data/prompts/a.jsonl"
    m["spec"]["datasets"][1]["path"] = "/models/prompts/b.jsonl"
    return m

