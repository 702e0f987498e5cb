"""The manifest a user would `kubectl apply`, read and checked as admission would check it."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import ValidationError

from draftgen import admission, api
from draftgen_contracts import names
from draftgen_contracts.validation import error_lines


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
    """(metadata.name, spec) of a DatasetGeneration object; SpecError names every bad field."""
    name = (obj.get("metadata") or {}).get("name")
    problem = admission.name_problem(name)
    if problem:
        raise SpecError(problem)
    if not isinstance(obj.get("spec"), dict):
        raise SpecError("spec: required, a mapping")
    try:
        # strict: the API server takes no "0.7" for a number, nor "5" for an integer
        spec = api.DatasetGenerationSpec.model_validate(obj["spec"], strict=True)
    except ValidationError as e:
        raise SpecError("\n  ".join(error_lines(e, "spec"))) from None
    problems = admission.spec_problems(spec)
    if problems:
        raise SpecError("\n  ".join(problems))
    return name, spec


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
