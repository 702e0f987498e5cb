"""The manifest a user would `kubectl apply`, read and checked as admission would check it."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import ValidationError

from draftgen import admission, api
from draftgen.crd import crd
from draftgen_contracts import names
from draftgen_contracts.validation import error_lines


SPEC_SCHEMA = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


class SpecError(ValueError):
    """A spec file that cannot be run; the message names the file and the fields."""


def dataset_generation(documents: list) -> dict:
    """The one DatasetGeneration among a file's YAML documents (a file may carry its PVCs too)."""
    found = [d for d in documents if isinstance(d, dict) and d.get("kind") == names.KIND]
    if len(found) != 1:
        raise SpecError(f"expected one {names.KIND} object, found {len(found)}")
    obj = found[0]
    if obj.get("apiVersion") != names.API_VERSION:
        raise SpecError(f"apiVersion: {obj.get('apiVersion')!r}, expected {names.API_VERSION}")
    return obj


def parse_object(obj: dict) -> tuple[str, api.DatasetGenerationSpec]:
    """(metadata.name, spec) of a DatasetGeneration object; SpecError names every bad field (the
    name's, the field types', then the rules' once the types hold, as the API server checks them)."""
    name = (obj.get("metadata") or {}).get("name")
    problems = [p for p in [admission.name_problem(name)] if p]
    spec = None
    if not isinstance(obj.get("spec"), dict):
        problems.append("spec: required, a mapping")
    else:
        read, wide = as_the_api_server_reads(obj["spec"], SPEC_SCHEMA)
        try:
            # strict: the API server takes no "0.7" for a number, nor "5" for an integer
            spec = api.DatasetGenerationSpec.model_validate(read, strict=True)
        except ValidationError as e:
            problems += error_lines(e, "spec")
        if wide:  # never a valid integer: no rule is evaluated on it
            problems, spec = problems + wide, None
    if spec is not None:
        problems += admission.spec_problems(spec)
        problems += admission.object_problems(name, spec) if not admission.name_problem(name) else []
    if problems:
        raise SpecError("\n  ".join(problems))
    return name, spec


def as_the_api_server_reads(value, schema: dict, path: str = "spec") -> tuple[object, list[str]]:
    """The value as the API server validates it, and what it refuses in it before any rule: a null
    where the schema names a field, or as a value of a map, is dropped (then defaulted or missing: it
    prunes the nulls of non-nullable fields; free-form objects are kept), and an integer beyond 64
    bits is refused (it reads one as a float)."""
    if isinstance(value, dict) and "properties" in schema:
        known, kept, problems = schema["properties"], {}, []
        for k, v in value.items():
            if k not in known:
                kept[k] = v
            elif v is not None:
                kept[k], found = as_the_api_server_reads(v, known[k], f"{path}.{k}")
                problems += found
        return kept, problems
    if isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):  # a map: its nulls too
        read = {k: as_the_api_server_reads(v, schema["additionalProperties"], f"{path}.{k}")
                for k, v in value.items() if v is not None}
        return {k: v for k, (v, _) in read.items()}, [p for _, found in read.values() for p in found]
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        read = [as_the_api_server_reads(v, schema["items"], f"{path}[{i}]") for i, v in enumerate(value)]
        return [v for v, _ in read], [p for _, found in read for p in found]
    if schema.get("type") == "integer" and type(value) is int and not -2**63 <= value < 2**63:
        return value, [f"{path}: must be of type integer (a 64-bit one)"]
    return value, []


def load_spec(path: str | os.PathLike) -> tuple[str, api.DatasetGenerationSpec]:
    try:
        documents = list(yaml.safe_load_all(Path(path).read_text()))
    except OSError as e:
        raise SpecError(f"{path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: not valid YAML: {e}") from None
    try:
        return parse_object(dataset_generation(documents))
    except SpecError as e:
        raise SpecError(f"{path}: {e}") from None


def local_spec(spec: api.DatasetGenerationSpec) -> api.DatasetGenerationSpec:
    """The spec as run here: one generate process, replica 0 of 1, against one server."""
    return spec.model_copy(update={"server": spec.server.model_copy(update={"replicas": 1})})
