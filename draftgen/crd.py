"""Generate the DatasetGeneration CRD from draftgen.api: `draftgen crd > crds/datasetgenerations.draftgen.io.yaml`.

Pydantic's JSON schema is turned into a Kubernetes structural schema: references inlined,
optional-ness expressed by `required` alone, draft-2020 exclusive bounds turned into OpenAPI v3's,
free-form maps marked x-kubernetes-preserve-unknown-fields. A test keeps crds/ equal to this output.
"""

from __future__ import annotations

from typing import Any

import yaml

from draftgen_contracts import names

from . import admission, api

PRINTER_COLUMNS = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Tokens", "type": "integer", "jsonPath": ".status.tokens"},
    {"name": "Budget", "type": "integer", "jsonPath": ".status.budgetTokens"},
    {"name": "Progress", "type": "string", "jsonPath": ".status.progress"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {"name": "Stage", "type": "string", "jsonPath": ".status.stage", "priority": 1},
    # The estimate (docs/preflight.md#the-estimate), refreshed from measured lengths and rates.
    {"name": "Ends", "type": "string", "jsonPath": ".status.estimate.generationEnds", "priority": 1,
     "description": "Projected end of generation"},
    {"name": "Corpus", "type": "integer", "jsonPath": ".status.estimate.corpusTokens", "priority": 1,
     "description": "Projected prompt + response tokens of the corpus"},
    {"name": "States", "type": "string", "jsonPath": ".status.estimate.hiddenStateSize", "priority": 1,
     "description": "Projected size of the hidden states"},
    {"name": "Disk", "type": "string", "jsonPath": ".status.estimate.diskSize", "priority": 1,
     "description": "Projected bytes on the output volume: records, corpus, states and every export"},
]

_DROP = {"title", "$defs"}


def structural(node: Any, defs: dict, keep_defaults: bool = True) -> Any:
    if isinstance(node, list):
        return [structural(n, defs, keep_defaults) for n in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    if "$ref" in node:
        target = defs[node.pop("$ref").split("/")[-1]]
        node = {**target, **node}  # the field's own description and extensions win
    if "anyOf" in node:  # Optional[X] -> X; optional-ness is `required`'s business
        variants = [v for v in node.pop("anyOf") if v.get("type") != "null"]
        assert len(variants) == 1, f"unions are not structural: {variants}"
        node = {**structural(variants[0], defs, keep_defaults), **node}
    if "const" in node:  # a one-value Literal
        node["enum"] = [node.pop("const")]
    if node.get("default", 0) is None or not keep_defaults:
        node.pop("default", None)
    for bound, inclusive in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if bound in node and not isinstance(node[bound], bool):
            node[inclusive] = node.pop(bound)
            node[bound] = True
    if node.get("x-kubernetes-preserve-unknown-fields"):
        node.pop("additionalProperties", None)
        node.setdefault("type", "object")
    out = {k: structural(v, defs, keep_defaults) for k, v in node.items() if k not in _DROP}
    if out.get("type") == "object" and "properties" in out:
        out.pop("additionalProperties", None)  # extra="forbid": unknown fields are pruned (or refused by kubectl)
    return out


# The schema's `integer` admits 1.0 (stored as 1), and then every CEL rule that reads the field
# fails on it ("invalid data, expected int, got float64"), naming the rule's node instead of the
# field; `draftgen run` refuses it outright. A rule on the field itself makes the API server refuse
# it there too, naming the field (measured on kube-apiserver 1.36).
INTEGER_RULE = api.cel("type(self) == int", "must be an integer, not a number with a fraction part such as 1.0")


def with_integer_rules(node: Any) -> Any:
    """Every integer field of the schema with INTEGER_RULE."""
    if isinstance(node, list):
        return [with_integer_rules(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: with_integer_rules(v) for k, v in node.items()}
    if out.get("type") == "integer":
        out["x-kubernetes-validations"] = [INTEGER_RULE, *out.get("x-kubernetes-validations", [])]
    return out


def schema_of(model: type, keep_defaults: bool) -> dict:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return structural(raw, raw.get("$defs", {}), keep_defaults)


def crd() -> dict:
    spec = with_integer_rules(schema_of(api.DatasetGenerationSpec, keep_defaults=True))
    spec["x-kubernetes-validations"] = [*admission.cel_rules(), *admission.presence_rules(api.DatasetGenerationSpec)]
    dataset = spec["properties"]["datasets"]["items"]
    dataset["x-kubernetes-validations"] = [*dataset.get("x-kubernetes-validations", []),
                                           *admission.presence_rules(api.Dataset)]
    status = schema_of(api.DatasetGenerationStatus, keep_defaults=False)
    root = {
        "type": "object",
        "description": "DatasetGeneration generates a drafter-training corpus from prompt datasets with a target "
                       "model served by SGLang, within per-dataset token budgets, then merges it and extracts "
                       "the target's EAGLE-3 hidden states.",
        "required": ["spec"],
        "x-kubernetes-validations": [rule.cel_rule() for rule in admission.OBJECT_RULES],
        # The name's rule sits on metadata.name (the one metadata field a CRD may restrict, with
        # generateName), so the API server's refusal names that field.
        "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                       "metadata": {"type": "object", "properties": {"name": {
                           "type": "string", "x-kubernetes-validations": [admission.NAME_RULE]}}},
                       "spec": spec, "status": status},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{names.PLURAL}.{names.GROUP}"},
        "spec": {
            "group": names.GROUP, "scope": "Namespaced",
            "names": {"kind": names.KIND, "plural": names.PLURAL, "singular": names.KIND.lower(),
                      "shortNames": [names.SHORT_NAME], "categories": ["draftgen"]},
            "versions": [{"name": names.VERSION, "served": True, "storage": True,
                          "subresources": {"status": {}}, "additionalPrinterColumns": PRINTER_COLUMNS,
                          "schema": {"openAPIV3Schema": root}}],
        },
    }


def render() -> str:
    return "# Generated by `draftgen crd` from draftgen/api.py; do not edit by hand.\n" + \
        yaml.safe_dump(crd(), sort_keys=False, width=120)

