"""The rules a DatasetGeneration must keep beyond its field types: one table of CEL rules.

The API server enforces them at admission, as the CEL rules `draftgen crd` writes into the CRD;
`draftgen run` enforces the same rule texts before it starts anything, evaluated in Python by a CEL
library (draftgen.cel_rules). Both say the same message naming the same field:
tests/manifests.py's cases run against both, and tests/operator/test_admission_differential.py holds
them to one verdict on generated manifests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic.alias_generators import to_camel

from draftgen import api
from draftgen.cel_rules import rule_checker
from draftgen_contracts import drafters, names
from draftgen_contracts.hidden_state_layout import EXPORT_FINAL_STATE
from draftgen_contracts.prompt_classes import DEFAULT_PROMPT_CLASSES
from draftgen_contracts.sglang_protocol import SGLANG_LAUNCHER

from draftgen.kube_types import VOLUME_SOURCES

DEFAULT_CLASS_NAMES = [c.name for c in DEFAULT_PROMPT_CLASSES]


@dataclass(frozen=True)
class Rule:
    field_path: str  # where the API server reports it, from the spec (".server.gpusPerReplica")
    message: str
    cel: str

    def cel_rule(self) -> dict:
        return api.cel(self.cel, self.message, field_path=self.field_path)



# A path segment ".." (RE2, for CEL, and Python alike; no backslash, which a CEL string would take
# for an escape).
CLIMBS = "(^|/)[.][.](/|$)"
# Flags draftgen gives the server itself (plan.server_args): a second one would contradict the spec.
# `--config`: SGLang reads one config file, and the server's keys come in draftgen's (docs/security.md).
OWN_SERVER_FLAGS = ["--model-path", "--tp-size", "--tensor-parallel-size", "--host", "--port", "--context-length",
                    "--config", "--nnodes", "--node-rank", "--dist-init-addr"]
# Node-selector keys and values (k8s.io/apimachinery pkg/util/validation): a qualified name, a label value.
QUALIFIED_NAME = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
LARGEST_DEFAULT_MAX_NEW = max(c.max_new_tokens for c in DEFAULT_PROMPT_CLASSES)


# datasets[].fields: the columns it names, each '' when unnamed (a name is never empty), and whether
# it names any column of a row's text (a pretokenized row has ids only; a trace has no prompt column).
FIELD_NAMES = [f for f in api.DatasetFields.model_fields]
FIELD_COLUMNS = "[" + ", ".join(f"has(d.fields.{f}) ? d.fields.{f} : ''" for f in FIELD_NAMES) + "]"
TEXT_FIELDS = " || ".join(f"has(d.fields.{f})" for f in ("prompt", "system", "messages", "tools"))


def folder(expression: str, default: str) -> str:
    """CEL: an optional mount path (its default when unset) with one trailing slash, for startsWith."""
    return (f"(has({expression}) ? ({expression}.endsWith('/') ? {expression} : {expression} + '/') : "
            f"'{default}/')")


def fields_rule(condition: str) -> str:
    return f"self.datasets.all(d, !has(d.fields) || ({condition}))"


POD_VOLUMES = "!has(self.pods) || !has(self.pods.volumes)"
# Where draftgen's containers that take server.volumeMounts (the server, the extraction) mount its own volumes.
OWN_MOUNTS = [names.DATA_MOUNT, "/dev/shm", names.KEYS_MOUNT, names.CODE_MOUNT, "/tmp"]
SGLANG_BACKEND_CEL = "!has(self.extraction) || !has(self.extraction.backend) || self.extraction.backend != 'sglang'"
DRAFTERS_CEL = "(has(self.extraction.drafters) ? self.extraction.drafters : ['eagle3'])"


def final_state_readers(kind: str) -> list[str]:
    """The drafters whose `kind` export reads the final state (SpecForge's DFlash does not)."""
    return [d for d in drafters.EXPORT_DRAFTERS[kind] if (kind, d) not in drafters.IGNORES_FINAL_STATE]
ONE_NODE = "self.server.nodesPerReplica == 1"
EXTRACTION_GPUS = api.Extraction.model_fields["gpus"].default
SERVER_TP = api.Server.model_fields["tensor_parallel_size"].default






SPEC_RULES = [
    Rule(".server.image", "server: exactly one of image (draftgen starts the servers) and endpoint (a server "
         "that already runs)", "has(self.server.image) != has(self.server.endpoint)"),
    Rule(".server.endpoint", "server.endpoint: extraction.backend sglang runs the server's image; with an endpoint "
         "use extraction.backend transformers", f"!has(self.server.endpoint) || {SGLANG_BACKEND_CEL}"),
    Rule(".server.gpusPerReplica", "server.gpusPerReplica x server.nodesPerReplica (a replica's GPUs) must be a "
         "multiple of server.tensorParallelSize",
         "(self.server.gpusPerReplica * self.server.nodesPerReplica) % self.server.tensorParallelSize == 0"),
    Rule(".server.nodesPerReplica", "server.nodesPerReplica: a server that already runs (server.endpoint) has no "
         "nodes of draftgen's; leave it 1", f"!has(self.server.endpoint) || {ONE_NODE}"),
    Rule(".server.nodesPerReplica", "server.nodesPerReplica: extraction.backend sglang runs the server in one pod; "
         "a replica across nodes extracts with extraction.backend transformers",
         f"{ONE_NODE} || {SGLANG_BACKEND_CEL}"),
    Rule(".server.shmSize", "server.shmSize must be a Kubernetes quantity such as 64Gi",
         "!has(self.server.shmSize) || isQuantity(self.server.shmSize)"),
    Rule(".promptClasses", "exactly one prompt class must have no maxPromptTokens (it takes the longest prompts)",
         "!has(self.promptClasses) || self.promptClasses.filter(c, !has(c.maxPromptTokens)).size() == 1"),
    Rule(".datasets", "datasets[].promptClass must name one of promptClasses",
         "self.datasets.all(d, !has(d.promptClass) || (has(self.promptClasses) ? "
         f"self.promptClasses.exists(c, c.name == d.promptClass) : d.promptClass in {DEFAULT_CLASS_NAMES}))"),
    Rule(".promptClasses", "promptClasses[].maxNewTokens must be below model.contextLength (the server refuses a "
         "request that cannot fit one prompt token and its max_new_tokens); without promptClasses, the default "
         f"classes ask for up to {LARGEST_DEFAULT_MAX_NEW} new tokens: set promptClasses whose maxNewTokens fit, or "
         f"a model.contextLength above {LARGEST_DEFAULT_MAX_NEW}",
         f"has(self.promptClasses) ? self.promptClasses.all(c, c.maxNewTokens < self.model.contextLength) : "
         f"{LARGEST_DEFAULT_MAX_NEW} < self.model.contextLength"),
    Rule(".datasets", "datasets[].maxNewTokens must be below model.contextLength",
         "self.datasets.all(d, !has(d.maxNewTokens) || d.maxNewTokens < self.model.contextLength)"),
    Rule(".datasets", "datasets[].path must not climb out of the volume with a '..' segment",
         f"self.datasets.all(d, !d.path.matches('{CLIMBS}'))"),
    Rule(".datasets", f"datasets[].path, when absolute, must be in the data volume ({names.DATA_MOUNT}/), the inputs "
         "volume (inputs.mountPath) or the model volume (model.mountPath): a pod's other files are its secrets "
         "and its image",
         f"self.datasets.all(d, !d.path.startsWith('/') || d.path.startsWith('{names.DATA_MOUNT}/') || "
         f"(has(self.inputs) && d.path.startsWith({folder('self.inputs.mountPath', '/inputs')})) || "
         "d.path.startsWith(self.model.mountPath.endsWith('/') ? self.model.mountPath : self.model.mountPath + '/'))"),
    Rule(".inputs.mountPath", f"inputs.mountPath must not hold a '..' segment, nor be {names.DATA_MOUNT} or "
         "model.mountPath (a pod mounts each volume at a path of its own)",
         f"!has(self.inputs) || !has(self.inputs.mountPath) || (!self.inputs.mountPath.matches('{CLIMBS}') && "
         f"{folder('self.inputs.mountPath', '/inputs')} != '{names.DATA_MOUNT}/' && "
         f"{folder('self.inputs.mountPath', '/inputs')} != {folder('self.model.mountPath', '/models')})"),
    Rule(".datasets", "datasets[].fields must name at least one of " + ", ".join(FIELD_NAMES),
         fields_rule(" || ".join(f"has(d.fields.{f})" for f in FIELD_NAMES))),
    Rule(".datasets", "datasets[].fields: prompt and messages are two shapes of a row: name one of them",
         fields_rule("!(has(d.fields.prompt) && has(d.fields.messages))")),
    Rule(".datasets", "datasets[].fields must name a column once (each field needs a column of its own)",
         fields_rule(f"{FIELD_COLUMNS}.filter(c, c != '').all(c, {FIELD_COLUMNS}.filter(x, x == c).size() == 1)")),
    Rule(".datasets", "datasets[].fields: a pretokenized dataset's rows are input_ids, so only id applies",
         fields_rule(f"!has(d.pretokenized) || !d.pretokenized || !({TEXT_FIELDS})")),
    Rule(".datasets", "datasets[].fields: a trace's prompt and response come from its messages, so prompt and "
         "system do not apply", fields_rule("!has(d.kind) || d.kind != 'traces' || !(has(d.fields.prompt) || "
                                            "has(d.fields.system))")),
    Rule(".output.path", "output.path must not climb out of the volume with a '..' segment",
         f"!has(self.output.path) || !self.output.path.matches('{CLIMBS}')"),
    Rule(".model.path", "model.path and model.tokenizer must not climb out of the volume with a '..' segment",
         f"!self.model.path.matches('{CLIMBS}') && (!has(self.model.tokenizer) || !self.model.tokenizer.matches('{CLIMBS}'))"),
    Rule(".model.mountPath", "model.mountPath must not hold a '..' segment",
         f"!has(self.model.mountPath) || !self.model.mountPath.matches('{CLIMBS}')"),
    Rule(".server.args", f"server.args must not set {', '.join(OWN_SERVER_FLAGS)}: draftgen sets them from the spec",
         f"!has(self.server.args) || !self.server.args.exists(a, a.split('=')[0] in {json.dumps(OWN_SERVER_FLAGS)})"),
    Rule(".server.args", "server.args must not set --trust-remote-code: set model.trustRemoteCode: true, which "
         "gives the server the flag and loads the tokenizer, config and model with the same trust in draftgen's pods",
         "!has(self.server.args) || !self.server.args.exists(a, a.split('=')[0] == '--trust-remote-code')"),
    Rule(".server.nodeSelector", "server.nodeSelector keys must be qualified names and its values label values",
         f"!has(self.server.nodeSelector) || self.server.nodeSelector.all(k, k.matches('{QUALIFIED_NAME}') && "
         f"self.server.nodeSelector[k].matches('{LABEL_VALUE}'))"),
    Rule(".cpuStages.nodeSelector", "cpuStages.nodeSelector keys must be qualified names and its values label values",
         f"!has(self.cpuStages) || !has(self.cpuStages.nodeSelector) || self.cpuStages.nodeSelector.all(k, "
         f"k.matches('{QUALIFIED_NAME}') && self.cpuStages.nodeSelector[k].matches('{LABEL_VALUE}'))"),
    Rule(".pods.labels", f"pods.labels keys must be qualified names outside {names.GROUP}/ (draftgen's own labels) "
         "and its values label values",
         f"!has(self.pods) || !has(self.pods.labels) || self.pods.labels.all(k, k.matches('{QUALIFIED_NAME}') && "
         f"!k.startsWith('{names.GROUP}/') && self.pods.labels[k].matches('{LABEL_VALUE}'))"),
    Rule(".pods.annotations", "pods.annotations keys must be qualified names",
         f"!has(self.pods) || !has(self.pods.annotations) || self.pods.annotations.all(k, k.matches('{QUALIFIED_NAME}'))"),
    Rule(".pods.volumes", f"pods.volumes[] must have exactly one source ({', '.join(VOLUME_SOURCES)})",
         f"{POD_VOLUMES} || self.pods.volumes.all(v, [{', '.join(f'has(v.{s})' for s in VOLUME_SOURCES)}]"
         ".filter(x, x).size() == 1)"),
    Rule(".pods.volumes", f"pods.volumes[].name must not be one of draftgen's own volumes ({', '.join(api.OWN_VOLUMES)})",
         f"{POD_VOLUMES} || self.pods.volumes.all(v, !(v.name in {json.dumps(api.OWN_VOLUMES)}))"),
    Rule(".server.volumeMounts", "server.volumeMounts[].name must name a volume of pods.volumes",
         "!has(self.server.volumeMounts) || self.server.volumeMounts.all(m, has(self.pods) && has(self.pods.volumes) "
         "&& self.pods.volumes.exists(v, v.name == m.name))"),
    Rule(".server.volumeMounts", f"server.volumeMounts[].mountPath must not be one of the folders draftgen mounts "
         f"({', '.join(OWN_MOUNTS)}, model.mountPath)",
         f"!has(self.server.volumeMounts) || self.server.volumeMounts.all(m, !(m.mountPath in {json.dumps(OWN_MOUNTS)}) "
         "&& m.mountPath != self.model.mountPath)"),
    Rule(".server.env", "server.env must not set POD_IP: the server binds the pod's address from it",
         "!has(self.server.env) || !self.server.env.exists(e, e.name == 'POD_IP')"),
    Rule(".server.env", "server.env[]: a value or a valueFrom, not both; a valueFrom names exactly one source",
         "!has(self.server.env) || self.server.env.all(e, !(has(e.value) && has(e.valueFrom)) && (!has(e.valueFrom) "
         "|| [has(e.valueFrom.fieldRef), has(e.valueFrom.resourceFieldRef), has(e.valueFrom.configMapKeyRef), "
         "has(e.valueFrom.secretKeyRef)].filter(x, x).size() == 1))"),
    Rule(".atBudget", "atBudget: cut keeps the responses cut at the budget, which merge.truncated: drop would "
         "remove, leaving every dataset short of its budget: use atBudget: abort, or merge.truncated: mark or keep",
         "(has(self.atBudget) ? self.atBudget : 'cut') != 'cut' || !has(self.merge) || "
         "!has(self.merge.truncated) || self.merge.truncated != 'drop'"),
    Rule(".extraction.layers", "extraction.layers must be >= 0",
         "!has(self.extraction) || !has(self.extraction.layers) || self.extraction.layers.all(l, l >= 0)"),
    Rule(".extraction.backend", "extraction.backend: sglang runs jobrunner with the server's Python: "
         f"server.command must end with {' '.join(SGLANG_LAUNCHER)}",
         f"{SGLANG_BACKEND_CEL} || !has(self.server.command) || (self.server.command.size() > 2 && "
         f"self.server.command[self.server.command.size() - 2] == '{SGLANG_LAUNCHER[0]}' && "
         f"self.server.command[self.server.command.size() - 1] == '{SGLANG_LAUNCHER[1]}')"),
    Rule(".extraction.gpus", "extraction.gpus must equal server.tensorParallelSize with extraction.backend: sglang "
         "(one rank per GPU), or be 0 with server.tensorParallelSize 1 (the CPU)",
         f"{SGLANG_BACKEND_CEL} || (has(self.extraction.gpus) ? self.extraction.gpus : {EXTRACTION_GPUS}) == "
         f"(has(self.server.tensorParallelSize) ? self.server.tensorParallelSize : {SERVER_TP}) || "
         f"((has(self.extraction.gpus) ? self.extraction.gpus : {EXTRACTION_GPUS}) == 0 && "
         f"(has(self.server.tensorParallelSize) ? self.server.tensorParallelSize : {SERVER_TP}) == 1)"),
    Rule(".extraction.drafters", "extraction.drafters: " + drafters.problem(["mtp"], None),
         f"!has(self.extraction) || !{DRAFTERS_CEL}.all(d, d == 'mtp') || "
         "(has(self.extraction.layers) && self.extraction.layers.size() > 0)"),
    Rule(".extraction.exports", "extraction.exports: each trains some of extraction.drafters (" + "; ".join(
             f"{kind}: {', '.join(served)}" for kind, served in drafters.EXPORT_DRAFTERS.items()) + ")",
         "!has(self.extraction) || !has(self.extraction.exports) || self.extraction.exports.all(e, " + " || ".join(
             f"(e == '{kind}' && {DRAFTERS_CEL}.exists(d, d in {json.dumps(list(served))}))"
             for kind, served in drafters.EXPORT_DRAFTERS.items()) + ")"),
    Rule(".extraction.exports", "extraction.exports: " + ", ".join(
             f"{kind} trains {', '.join(final_state_readers(kind))} on the {state} final state "
             f"(extraction.finalState: {state})" for kind, state in EXPORT_FINAL_STATE.items()),
         "!has(self.extraction) || !has(self.extraction.exports) || self.extraction.exports.all(e, " + " || ".join(
             f"(e == '{kind}' && (!{DRAFTERS_CEL}.exists(d, d in {json.dumps(final_state_readers(kind))}) || "
             f"(has(self.extraction.finalState) ? self.extraction.finalState : 'post-norm') == '{state}'))"
             for kind, state in EXPORT_FINAL_STATE.items()) + ")"),
]

NAME_RULE = api.cel(f"self.size() <= {names.MAX_NAME_LENGTH}",
                    f"metadata.name must be at most {names.MAX_NAME_LENGTH} characters so every child object's name "
                    "(Jobs, pods, ServiceAccount, reports) stays valid")


# A multi-node replica's pods take "<job>-<rank>" as their hostname and find their leader under the
# Service "<name>-ranks": both must be DNS labels (a Service's must start with a letter), so the run's
# name must be one too. A rule on the object's root, the one place that sees metadata.name and the spec.
DNS_LABEL = "^[a-z]([-a-z0-9]*[a-z0-9])?$"
OBJECT_RULES = [
    Rule(".metadata.name", "metadata.name: with server.nodesPerReplica above 1 the name must be a DNS label "
         "(lowercase letters, digits and '-', starting with a letter, no '.'): it names the replica's pods' "
         "hostnames and the Service they find each other under",
         "!has(self.spec) || !has(self.spec.server) || !has(self.spec.server.nodesPerReplica) || "
         f"self.spec.server.nodesPerReplica == 1 || self.metadata.name.matches('{DNS_LABEL}')"),
]


def object_problems(name: str, spec: api.DatasetGenerationSpec) -> list[str]:
    """Every rule of the object's root the object breaks (OBJECT_RULES), as the API server says them."""
    holds = rule_checker(self={"metadata": {"name": name}, "spec": as_applied(spec)})
    return [rule.message for rule in OBJECT_RULES if not holds(rule.cel)]


def name_problem(name: object) -> str | None:
    """What the API server says of a metadata.name: a DNS subdomain, and our length limit."""
    if not isinstance(name, str) or not names.NAME_PATTERN.match(name):
        return f"metadata.name: {name!r} must be a lowercase DNS name"
    if not rule_checker(self=name)(NAME_RULE["rule"]):
        return f"metadata.name: {NAME_RULE['message']}"
    return None


def duplicate_keys(field: str, keys: list[str]) -> list[str]:
    """A list-map's repeated keys, as the API server names them (the CRD's x-kubernetes-list-map-keys
    make it refuse them, before any CEL rule runs)."""
    return duplicate_values(field, [{"name": key} for key in keys])


def duplicate_values(field: str, values: list) -> list[str]:
    """A set-list's repeated values, as the API server names them (x-kubernetes-list-type: set)."""
    return [f"spec.{field}[{i}]: Duplicate value: {json.dumps(value)}" for i, value in enumerate(values)
            if value in values[:i]]


def spec_problems(spec: api.DatasetGenerationSpec) -> list[str]:
    """Every rule the spec breaks, as "spec<field>: <message>"."""
    duplicates = [*duplicate_keys("datasets", [d.name for d in spec.datasets]),
                  *duplicate_keys("promptClasses", [c.name for c in spec.prompt_classes]),
                  *duplicate_values("merge.exports", list(spec.merge.exports)),
                  *duplicate_values("extraction.exports", list(spec.extraction.exports)),
                  *duplicate_keys("server.env", [e.name for e in spec.server.env]),
                  *duplicate_keys("pods.volumes", [v.name for v in spec.pods.volumes]),
                  *duplicate_values("server.volumeMounts", [{"mountPath": m.mount_path} for m in spec.server.volume_mounts])]
    holds = rule_checker(self=as_applied(spec))
    return duplicates or [f"spec{rule.field_path}: {rule.message}" for rule in SPEC_RULES if not holds(rule.cel)]


def as_applied(value: Any) -> Any:
    """A spec (or a part of one) as a CEL rule sees it on the API server: camelCase JSON with the
    defaults applied and no nulls."""
    return value.model_dump(by_alias=True, mode="json", exclude_none=True) if hasattr(value, "model_dump") else value


def cel_rules() -> list[dict]:
    """The spec's x-kubernetes-validations."""
    return [rule.cel_rule() for rule in SPEC_RULES]


def _immutable(model: type, field: str) -> bool:
    return model.model_fields[field].json_schema_extra is api.IMMUTABLE


def immutable_changes(old: api.DatasetGenerationSpec, new: api.DatasetGenerationSpec) -> list[str]:
    """The fields marked immutable (api.IMMUTABLE, the CRD's `self == oldSelf`) that `new` changes, as
    the API server names them on an update; a dataset's are compared with the dataset of its name."""
    changed = [f"spec.{to_camel(f)}" for f in api.DatasetGenerationSpec.model_fields
               if _immutable(api.DatasetGenerationSpec, f) and _changes(getattr(old, f), getattr(new, f))]
    before = {d.name: d for d in old.datasets}
    for i, d in enumerate(new.datasets):
        if d.name in before:
            changed += [f"spec.datasets[{i}].{to_camel(f)}" for f in api.Dataset.model_fields
                        if _immutable(api.Dataset, f) and _changes(getattr(before[d.name], f), getattr(d, f))]
    return [f"{field}: {IMMUTABLE_RULE['message']}" for field in changed]


IMMUTABLE_RULE = api.IMMUTABLE["x-kubernetes-validations"][0]


def presence_rules(model: type) -> list[dict]:
    """The parent's transition rules that keep an optional immutable field from being added or removed:
    the API server evaluates a field's own `self == oldSelf` only when the field is in both objects."""
    return [api.cel(f"has(self.{to_camel(f)}) == has(oldSelf.{to_camel(f)})", IMMUTABLE_RULE["message"],
                    field_path=f".{to_camel(f)}")
            for f, info in model.model_fields.items() if _immutable(model, f) and info.default is None]


def _changes(old: Any, new: Any) -> bool:
    """Whether the CRD's transition rules refuse going from `old` to `new` (presence_rules for a field
    added or removed, the field's own rule otherwise)."""
    if old is None or new is None:
        return (old is None) != (new is None)
    return not rule_checker(self=as_applied(new), oldSelf=as_applied(old))(IMMUTABLE_RULE["rule"])

