"""`jobrunner generate --config F`: the whole configuration of one generate process.

The operator renders this from a DatasetGeneration spec (one file per replica: only `replica`
differs); the local runner writes it by hand. YAML or JSON. Every error names the field.

Example:

    server_url: http://127.0.0.1:30000
    output_root: /data/run1
    tokenizer_path: /models/kimi-k2.5
    chat_template_kwargs: {thinking: true}
    datasets:
      - name: glaive-fc
        path: /data/prompts/glaive.jsonl
        budget_tokens: 10000000
        sampling_params: {temperature: 0.6, top_p: 0.95}
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from draftgen_contracts import budget_shares
from draftgen_contracts.prompt_classes import DEFAULT_PROMPT_CLASSES, PromptClass
from draftgen_contracts.sglang_protocol import InvalidSamplingParams, validate_sampling_params
from draftgen_contracts.validation import error_lines


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PromptClassConfig(_Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    max_prompt_tokens: int | None = Field(default=None, gt=0, description="None: no upper bound (the last class)")
    concurrency: int = Field(gt=0)
    max_new_tokens: int = Field(gt=0)

    def to_prompt_class(self) -> PromptClass:
        return PromptClass(self.name, self.max_prompt_tokens, self.concurrency, self.max_new_tokens)


def _default_classes() -> list[PromptClassConfig]:
    return [PromptClassConfig(**c.__dict__) for c in DEFAULT_PROMPT_CLASSES]


class DatasetConfig(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=100)
    path: str
    format: Literal["auto", "jsonl", "parquet"] = "auto"
    pretokenized: bool = False
    kind: Literal["prompts", "traces"] = Field(
        default="prompts", description="traces: rows already hold the target's responses; never sent to the server")
    budget_tokens: int = Field(gt=0)
    sample_cap: int | None = Field(default=None, gt=0, description="completed responses, over all replicas")
    prompt_class: str | None = Field(default=None, description="put every prompt in this class")
    max_new_tokens: int | None = Field(default=None, gt=0, description="instead of the class's")
    concurrency: int | None = Field(default=None, gt=0, description="at most this many in flight for this dataset")
    sampling_params: dict[str, Any] = Field(default_factory=dict)
    chat_template_kwargs: dict[str, Any] | None = Field(default=None, description="merged over the global ones")
    extra_request_fields: dict[str, Any] = Field(
        default_factory=dict, description="top-level /generate keys (SGLang ignores unknown ones)")

    @field_validator("sampling_params")
    @classmethod
    def _valid_sampling_params(cls, v: dict[str, Any]) -> dict[str, Any]:
        if "max_new_tokens" in v:
            raise ValueError("set max_new_tokens on the dataset or its prompt class, not in sampling_params")
        try:
            return validate_sampling_params(v)
        except InvalidSamplingParams as e:
            raise ValueError(str(e)) from None

    @field_validator("extra_request_fields")
    @classmethod
    def _no_reserved_fields(cls, v: dict[str, Any]) -> dict[str, Any]:
        reserved = {"input_ids", "text", "sampling_params", "rid", "stream"} & set(v)
        if reserved:
            raise ValueError(f"{sorted(reserved)} are set by jobrunner")
        return v


class ContextConfig(_Strict):
    length: int | None = Field(default=None, gt=0, description="None: the server's /v1/models max_model_len")
    policy: Literal["skip", "clamp"] = "clamp"
    min_room_tokens: int = Field(default=256, gt=0)


class CoordinationConfig(_Strict):
    """`file`: JSON files in a directory (the local runner, tests). `kubernetes`: a report ConfigMap
    per replica and the DatasetGeneration's status (generation pods; jobrunner.coordination_kube)."""
    kind: Literal["file", "kubernetes"] = "file"
    directory: str | None = Field(default=None, description="file: None means <output_root>/coordination")
    name: str | None = Field(default=None, description="kubernetes: the DatasetGeneration's name")
    namespace: str | None = Field(default=None, description="kubernetes: its namespace")

    @model_validator(mode="after")
    def _complete(self) -> CoordinationConfig:
        if self.kind == "kubernetes" and not (self.name and self.namespace):
            raise ValueError("kind kubernetes needs name and namespace")
        return self


class GenerateConfig(_Strict):
    server_url: str = Field(pattern=r"^https?://")
    startup_timeout_s: float = Field(default=1800.0, gt=0)
    request_timeout_s: float = Field(default=3600.0, gt=0)
    max_attempts: int = Field(default=6, gt=0, description="per request, retries included")
    output_root: str
    run_id: str = Field(default="draftgen", min_length=1)
    replica: int = Field(default=0, ge=0)
    replicas: int = Field(default=1, gt=0)
    tokenizer_path: str | None = None
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    context: ContextConfig = Field(default_factory=ContextConfig)
    prompt_classes: list[PromptClassConfig] = Field(default_factory=_default_classes, min_length=1)
    datasets: list[DatasetConfig] = Field(min_length=1)
    progress_interval_s: float = Field(default=5.0, gt=0, description="fsync + publish cadence")
    at_budget: Literal[budget_shares.AT_BUDGET] = Field(
        default=budget_shares.CUT, description="the requests in flight when a replica's part is made: "
        "cut (partial responses kept, marked truncated) or abort (thrown away)")
    coordination: CoordinationConfig = Field(default_factory=CoordinationConfig)

    @model_validator(mode="after")
    def _consistent(self) -> GenerateConfig:
        if self.replica >= self.replicas:
            raise ValueError(f"replica {self.replica} must be < replicas {self.replicas}")
        names = [d.name for d in self.datasets]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"datasets: duplicate names {duplicates}")
        class_names = [c.name for c in self.prompt_classes]
        if len(set(class_names)) != len(class_names):
            raise ValueError("prompt_classes: duplicate names")
        if sum(c.max_prompt_tokens is None for c in self.prompt_classes) != 1:
            raise ValueError("prompt_classes: exactly one class must have no max_prompt_tokens (it takes the rest)")
        for i, d in enumerate(self.datasets):
            if d.prompt_class is not None and d.prompt_class not in class_names:
                raise ValueError(f"datasets[{i}].prompt_class: {d.prompt_class!r} is not one of {class_names}")
            if not d.pretokenized and self.tokenizer_path is None:
                raise ValueError(f"datasets[{i}] ({d.name}) is not pretokenized, so tokenizer_path is required")
        return self

    def prompt_class_table(self) -> list[PromptClass]:
        return [c.to_prompt_class() for c in self.prompt_classes]

    def template_kwargs_for(self, dataset: DatasetConfig) -> dict[str, Any]:
        return {**self.chat_template_kwargs, **(dataset.chat_template_kwargs or {})}

    def coordination_directory(self) -> Path:
        return Path(self.coordination.directory or os.path.join(self.output_root, "coordination"))


class ConfigError(ValueError):
    """A config file that cannot be used; the message names the file and the fields."""


def _format_validation_error(path: str, e: ValidationError) -> str:
    return "\n  ".join([f"{path}: invalid generate config", *error_lines(e, "config")])


def parse_config(data: Any, source: str = "<config>") -> GenerateConfig:
    try:
        return GenerateConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_validation_error(source, e)) from None


def load_config(path: str | os.PathLike) -> GenerateConfig:
    """Read a YAML or JSON config file (YAML is a superset of JSON, so one parser serves both)."""
    import yaml

    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror}") from None
    try:
        data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: not valid YAML/JSON: {e}") from None
    return parse_config(data, str(path))


def missing_inputs(config: GenerateConfig) -> list[str]:
    """Inputs the config names that are not there: problems no schema can see (a PVC holding a
    different model, a typo in a path), found before any request is sent."""
    problems = []
    needs_tokenizer = any(not d.pretokenized for d in config.datasets)
    if needs_tokenizer and config.tokenizer_path and not Path(config.tokenizer_path).is_dir():
        problems.append(f"tokenizer_path {config.tokenizer_path}: no such directory")
    for i, d in enumerate(config.datasets):
        if not Path(d.path).is_file():
            problems.append(f"datasets[{i}] ({d.name}): {d.path}: no such file")
    return problems
