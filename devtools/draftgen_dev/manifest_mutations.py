"""Structure-aware mutations of valid DatasetGenerations, for the differential admission test
(tests/operator/test_admission_differential.py): the two executors of the rules (the API server with
the CRD, `draftgen run` with pydantic and draftgen.admission) must refuse the same manifests naming
the same field.

The mutations come from the CRD's own schema, so every bound it states is probed where it is: a
number at and around its minimum and maximum, a string at its maximum length and past it or against
its pattern, an enum's values and near misses, a list empty, with a duplicate, past its maxItems; and
besides the schema: a field missing, an unknown field, a value of the wrong type, long names, odd
quantities, paths that climb or are absolute, prompt-class tables that overlap or leave no catch-all,
server flags draftgen owns. A manifest gets one to three of them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from draftgen.local.spec_file import dataset_generation

REPO = Path(__file__).resolve().parents[2]
CRD = yaml.safe_load((REPO / "crds" / "datasetgenerations.draftgen.io.yaml").read_text())
ROOT_SCHEMA = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def example(name: str) -> dict:
    """An example's DatasetGeneration (its file also holds the PVCs)."""
    return dataset_generation(list(yaml.safe_load_all((REPO / "examples" / name).read_text())))


BASES = [example("quickstart.yaml"), example("kimi-k25-eagle3.yaml"), example("hf-datasets.yaml"),
         example("two-node-replicas.yaml")]

# Kubernetes quantities a user might write, well-formed or not (apimachinery resource.ParseQuantity).
QUANTITIES = ["64Gi", "1.5Gi", "0.5", ".5", "1.", "1e3", "1E3", "+1Gi", "-1Gi", "1Ki", "1k", "1K", "1m",
              "0.1m", "Gi", "", " 1Gi", "1 Gi", "1gi", "1GB", "1e", "100000000000000000000Ei", "0", "+", ".", "m",
              "e3", "1.5.5", "1e-3", "1Gi\n", "1E", "0x10", "1_000"]
PATHS = ["prompts/x.jsonl", "../x.jsonl", "prompts/../../x", "a/..", "..", "./x", "x/./y", "/data/x.jsonl",
         "/data", "/data/", "/datax/y", "/models/p.jsonl", "/models", "/etc/passwd", "/", "a//b", "x..",
         "/inputs/a/*.parquet", "/inputs", "/inputsx/a.jsonl", "/lib/a.json"]
# datasets[].fields and spec.inputs as users may write them, the rules' edges among them.
FIELDS = [{}, {"prompt": "q"}, {"prompt": "q", "messages": "m"}, {"prompt": "q", "system": "q"}, {"id": "uid"},
          {"messages": "turns", "tools": "fns", "id": "uid"}, {"system": "s"}, {"prompt": ""}, {"prompt": 1}]
INPUTS = [{"claimName": "lib"}, {"claimName": "lib", "mountPath": "/lib"}, {"claimName": "lib", "mountPath": "/data"},
          {"claimName": "lib", "mountPath": "/models/"}, {"claimName": "lib", "mountPath": "/in/../x"},
          {"claimName": "lib", "mountPath": "/"}, {"mountPath": "/inputs"}]
NAMES = ["a", "a" * 40, "a" * 41, "a" * 45, "a" * 46, "a" * 63, "a" * 64, "A", "a_b", "-a", "a-", "a.b", "1a",
         "a-" * 20 + "b", "é"]
OWN_FLAGS = ["--model-path", "--tp-size", "--tensor-parallel-size", "--host", "--port", "--context-length",
             "--config", "--api-key", "--admin-api-key", "--mem-fraction-static", "--tp", "--port-x",
             "--nnodes", "--node-rank", "--dist-init-addr", "--dist-timeout"]
WRONG_TYPES = [None, True, 0, -1, 1.5, "7", "", [], {}, ["x"], {"x": 1}]


def schema_at(path: tuple) -> dict | None:
    """The schema node of the value at `path` (keys and list indices from the object's root)."""
    node = ROOT_SCHEMA
    for key in path:
        if isinstance(key, int):
            node = node.get("items")
        elif key in (node.get("properties") or {}):
            node = node["properties"][key]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
        if node is None:
            return None
    return node


def _near(bound: float, integer: bool) -> list:
    step = 1 if integer else 1e-9
    return [bound - step, bound, bound + step]


def values_for(node: dict) -> list:
    """Values at every bound the schema node states, near misses of its enum and pattern, wrong types."""
    kind, out = node.get("type"), list(WRONG_TYPES)
    if "enum" in node:
        out += list(node["enum"]) + [v.upper() for v in node["enum"]] + ["other"]
    if kind in ("integer", "number"):
        integer = kind == "integer"
        for bound in ("minimum", "maximum"):
            if bound in node:
                out += _near(node[bound], integer)
        out += [0, 1, 2, 2**31 - 1, 2**31, 2**53 + 1, 2**63, 10**20, 0.0, 1.0, 0.5, -0.5]
        if not integer:
            out += [1e-300, 1e308]
    elif kind == "string" and "enum" not in node:
        if "maxLength" in node:
            out += ["a" * node["maxLength"], "a" * (node["maxLength"] + 1)]
        out += ["", " ", "UPPER", "has space", "x" * 300, *PATHS, *NAMES[:8], *QUANTITIES[:6]]
    elif kind == "array":
        out += [[], ["a"] * 9, ["a"] * 65, [1, 1]]
    elif kind == "object":
        out += [{}, {"unknown": 1}]
    return out


def paths_in(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path under `value` (containers and leaves), the root excluded."""
    found = []
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return found
    for key, child in items:
        found.append((*path, key))
        found += paths_in(child, (*path, key))
    return found


def optional_paths(value: Any, path: tuple = ()) -> list[tuple]:
    """Schema properties not in the object, under every object that is: fields to add."""
    node = schema_at(path)
    found = []
    if node is None:
        return found
    if isinstance(value, dict):
        for key in (node.get("properties") or {}):
            if key not in value:
                found.append((*path, key))
        for key, child in value.items():
            found += optional_paths(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found += optional_paths(child, (*path, i))
    return found


def get(obj: Any, path: tuple) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def put(obj: Any, path: tuple, value: Any) -> None:
    get(obj, path[:-1])[path[-1]] = value


def delete(obj: Any, path: tuple) -> None:
    parent = get(obj, path[:-1])
    del parent[path[-1]]


@st.composite
def class_tables(draw) -> list[dict]:
    """promptClasses: overlapping bounds, no catch-all or two, lengths near the context."""
    n = draw(st.integers(0, 4))
    names = draw(st.lists(st.sampled_from(["short", "long", "all", "a", "Bad"]), min_size=n, max_size=n))
    table = []
    for name in names:
        entry = {"name": name, "concurrency": draw(st.sampled_from([1, 8, 4096, 4097, 0])),
                 "maxNewTokens": draw(st.sampled_from([1, 100, 4096, 16384, 32767, 32768, 40000, 0]))}
        limit = draw(st.sampled_from([None, None, 1, 512, 2048, 2048, 32768, 0]))
        if limit is not None:
            entry["maxPromptTokens"] = limit
        table.append(entry)
    return table


@st.composite
def server_args(draw) -> list[str]:
    args = []
    for _ in range(draw(st.integers(1, 3))):
        flag = draw(st.sampled_from(OWN_FLAGS))
        args += draw(st.sampled_from([[flag, "1"], [f"{flag}=1"], [flag], [f" {flag}"], [flag.upper(), "1"]]))
    return args


ENDPOINT_URLS = ["http://sglang.serving.svc:30000", "https://llm.example.com/v1x", "sglang:30000", "http://",
                 "http://a b:1", "ftp://sglang:30000"]


@st.composite
def mutation(draw, manifest: dict) -> str:
    """Apply one mutation to `manifest` in place; what it did, for the report."""
    choice = draw(st.sampled_from(["set", "set", "set", "delete", "add", "unknown", "classes", "args", "name",
                                   "dataset", "quantity", "path", "inputs", "endpoint", "drafters", "nodes"]))
    spec = manifest["spec"]
    if choice == "nodes":  # a replica across nodes, its parallelism, and what admission refuses beside it
        server = spec["server"]
        server["nodesPerReplica"] = draw(st.sampled_from([1, 2, 3, 16, 17, 0]))
        server["tensorParallelSize"] = draw(st.sampled_from([8, 16, 24, 32]))
        if draw(st.booleans()):
            spec.setdefault("extraction", {})["backend"] = draw(st.sampled_from(["sglang", "transformers"]))
        return f"server.nodesPerReplica={server['nodesPerReplica']} tp={server['tensorParallelSize']}"
    if choice == "endpoint":  # a server that already runs, in place of the image or beside it
        if draw(st.booleans()):
            spec["server"].pop("image", None)
        spec["server"]["endpoint"] = {"url": draw(st.sampled_from(ENDPOINT_URLS)),
                                      **draw(st.sampled_from([{}, {"adminApiKey": {"name": "keys", "key": "admin"}},
                                                              {"apiKey": {"name": "keys", "key": ""}}]))}
        return f"server.endpoint={spec['server']['endpoint']} image={'image' in spec['server']}"
    if choice == "drafters":
        extraction = spec.setdefault("extraction", {})
        extraction["drafters"] = draw(st.sampled_from([["eagle3"], ["dflash"], ["mtp"], ["mtp", "dflash"],
                                                       ["eagle3", "dflash", "mtp"], [], ["medusa"]]))
        extraction["finalState"] = draw(st.sampled_from(["post-norm", "pre-norm"]))
        extraction["exports"] = draw(st.sampled_from([[], ["specforge"], ["speculators"], ["specforge", "speculators"]]))
        if draw(st.booleans()):
            extraction["layers"] = draw(st.sampled_from([[3], [1, 2, 5], []]))
        return f"extraction={extraction}"
    if choice == "inputs":
        spec["inputs"] = copy.deepcopy(draw(st.sampled_from(INPUTS)))
        return f"inputs={spec['inputs']}"
    if choice == "classes":
        spec["promptClasses"] = draw(class_tables())
        spec["model"]["contextLength"] = draw(st.sampled_from([256, 2048, 4096, 16384, 32768, 40000]))
        return f"promptClasses={spec['promptClasses']} contextLength={spec['model']['contextLength']}"
    if choice == "args":
        spec["server"]["args"] = draw(server_args())
        return f"server.args={spec['server']['args']}"
    if choice == "name":
        manifest["metadata"]["name"] = draw(st.sampled_from(NAMES))
        return f"metadata.name={manifest['metadata']['name']!r}"
    if choice == "quantity":
        spec["server"]["shmSize"] = draw(st.sampled_from(QUANTITIES))
        return f"server.shmSize={spec['server']['shmSize']!r}"
    if choice == "path":
        field = draw(st.sampled_from([("datasets", 0, "path"), ("output", "path"), ("model", "path"),
                                      ("model", "tokenizer"), ("model", "mountPath")]))
        value = draw(st.sampled_from(PATHS))
        put(manifest, ("spec", *field), value)
        return f"{'.'.join(map(str, field))}={value!r}"
    if choice == "dataset":
        datasets = spec["datasets"]
        i = draw(st.integers(0, len(datasets) - 1))
        op = draw(st.sampled_from(["duplicate", "rename", "class", "empty", "many", "fields"]))
        if op == "duplicate":
            datasets.append(copy.deepcopy(datasets[i]))
        elif op == "rename":
            datasets[i]["name"] = datasets[(i + 1) % len(datasets)]["name"]
        elif op == "class":
            datasets[i]["promptClass"] = draw(st.sampled_from(["short", "long", "nope", "", "a" * 17]))
        elif op == "empty":
            spec["datasets"] = []
        elif op == "fields":
            datasets[i]["fields"] = copy.deepcopy(draw(st.sampled_from(FIELDS)))
        else:
            spec["datasets"] = [{**datasets[0], "name": f"d{k}"} for k in range(draw(st.sampled_from([64, 65])))]
        return f"datasets {op} {i}"
    paths = [("spec", *p) for p in paths_in(spec)]
    if choice == "add":
        paths = optional_paths(spec, ("spec",)) or paths
    if choice == "unknown":
        containers = [p for p in [("spec",), *paths] if isinstance(_get_or_none(manifest, p), dict)]
        where = draw(st.sampled_from(containers))
        get(manifest, where)[draw(st.sampled_from(["bogus", "maxTokens", "Replicas", "seed"]))] = 1
        return f"unknown field under {'.'.join(map(str, where))}"
    path = draw(st.sampled_from(paths))
    if choice == "delete":
        delete(manifest, path)
        return f"delete {'.'.join(map(str, path))}"
    node = schema_at(path)
    value = draw(st.sampled_from(values_for(node) if node else WRONG_TYPES))
    put(manifest, path, copy.deepcopy(value))
    return f"{'.'.join(map(str, path))}={value!r:.60}"


def _get_or_none(obj: Any, path: tuple) -> Any:
    try:
        return get(obj, path)
    except (KeyError, IndexError, TypeError):
        return None


@st.composite
def mutated_manifests(draw, keep_name: bool = False) -> tuple[dict, list[str]]:
    """A base manifest with one to three mutations, and what they were; `keep_name`: the base's
    name kept (an update of the object)."""
    base = draw(st.sampled_from(BASES))
    manifest = copy.deepcopy(base)
    done = []
    for _ in range(draw(st.integers(1, 3))):
        try:
            done.append(draw(mutation(manifest)))
        except (KeyError, IndexError, TypeError, AttributeError):
            done.append("(a mutation that no longer applied)")  # an earlier one replaced its parent
    manifest["metadata"] = {"name": base["metadata"]["name"] if keep_name else manifest["metadata"]["name"]}
    return manifest, done
