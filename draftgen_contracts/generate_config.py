"""The generate config: the whole configuration of one `jobrunner generate` (and `jobrunner
preflight`) process, with every rule it must satisfy. Every error names the field.

One model for its writers and its reader: the operator builds it from a DatasetGeneration spec
(draftgen.plan.generate_config; one per run, the replica comes on the command line) and writes it,
as YAML, into the run's config ConfigMap under `generate.yaml`; the local runner writes that
ConfigMap's contents into a folder of its own, with the paths moved to this machine (`with_paths`);
tests and benchmarks build it with their builders. jobrunner.shared.config reads it back (YAML or JSON)
into this model.

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

import os
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from . import budget_shares
from .names import DATASET_NAME_PATTERN
from .prompt_classes import DEFAULT_PROMPT_CLASSES, PromptClass, has_one_catch_all
from .sglang_protocol import InvalidSamplingParams, validate_sampling_params

# How long a server may take to load its weights, compile and capture graphs: a 1 TB checkpoint
# takes most of an hour. The spec's default (server.startupTimeoutSeconds) and the config's.
STARTUP_TIMEOUT_S = 3600

# What a dataset's file holds and how it is read; the spec's datasets[] say the same.
# The config's formats: the spec's, and a JSON array (`auto` tells it by its first byte as well).
DatasetFormat = Literal["auto", "jsonl", "json", "parquet"]
DatasetKind = Literal["prompts", "traces"]


class _Strict(BaseModel):
    # A misspelt key is an error, not a default silently used.
    model_config = ConfigDict(extra="forbid")


class DatasetFields(_Strict):
    """Which column of a row holds what, for datasets whose columns have other names (`problem`,
    `instruction`, `question`); unnamed ones are found as usual. `messages` may hold OpenAI turns
    (role/content) or ShareGPT ones (from/value); `id` makes the row's own id its source id."""

    prompt: str | None = Field(default=None, min_length=1, description="a column of text: the user's turn")
    system: str | None = Field(default=None, min_length=1, description="a column of text: the system prompt")
    messages: str | None = Field(default=None, min_length=1, description="a column holding a list of turns")
    tools: str | None = Field(default=None, min_length=1, description="a column holding the tools offered")
    id: str | None = Field(default=None, min_length=1, description="a column holding the row's own id")

    @model_validator(mode="after")
    def _consistent(self) -> DatasetFields:
        named = {k: v for k, v in self.model_dump().items() if v is not None}
        if not named:
            raise ValueError("name at least one of prompt, system, messages, tools, id")
        if self.prompt and self.messages:
            raise ValueError("prompt and messages are two shapes of a row: name one of them")
        columns = list(named.values())
        if len(set(columns)) != len(columns):
            raise ValueError(f"each field needs a column of its own: {named}")
        return self


class DatasetConfig(_Strict):
    name: str = Field(pattern=DATASET_NAME_PATTERN)
    path: str = Field(description="a file, a folder of files or a glob of them, read in name order")
    format: DatasetFormat = "auto"
    fields: DatasetFields | None = Field(default=None, description="columns of other names")
    pretokenized: bool = False
    kind: DatasetKind = Field(
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

    @model_validator(mode="after")
    def _fields_fit_the_rows(self) -> DatasetConfig:
        f = self.fields
        if f is None:
            return self
        if self.pretokenized and (f.prompt or f.system or f.messages or f.tools):
            raise ValueError("fields: a pretokenized dataset's rows are input_ids; only id applies")
        if self.kind == "traces" and (f.prompt or f.system):
            raise ValueError("fields: a trace's prompt and response come from its messages; prompt and system "
                             "do not apply")
        return self

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
    per replica and the DatasetGeneration's status (generation pods; jobrunner.shared.coordination_kube)."""
    kind: Literal["file", "kubernetes"] = "file"
    directory: str | None = Field(default=None, description="file: None means <output_root>/coordination")
    name: str | None = Field(default=None, description="kubernetes: the DatasetGeneration's name")
    namespace: str | None = Field(default=None, description="kubernetes: its namespace")

    @model_validator(mode="after")
    def _complete(self) -> CoordinationConfig:
        if self.kind == "kubernetes" and not (self.name and self.namespace):
            raise ValueError("kind kubernetes needs name and namespace")
        return self


def default_coordination_directory(output_root: str) -> str:
    """Where `file` coordination keeps its progress files when the config names no directory."""
    return os.path.join(output_root, "coordination")


class GenerateConfig(_Strict):
    server_url: str = Field(pattern=r"^https?://")
    served_model_name: str | None = Field(default=None, min_length=1, description=(
        "set for a server that already runs (spec.server.endpoint): the model it must serve on /v1/models, "
        "which the preflight checks at server_url"))
    startup_timeout_s: float = Field(default=float(STARTUP_TIMEOUT_S), gt=0)
    request_timeout_s: float = Field(default=3600.0, gt=0)
    max_attempts: int = Field(default=6, gt=0, description="per request, retries included")
    output_root: str
    run_id: str = Field(default="draftgen", min_length=1)
    replica: int = Field(default=0, ge=0)
    replicas: int = Field(default=1, gt=0)
    tokenizer_path: str | None = None
    model_path: str | None = Field(default=None, description=(
        "the checkpoint's folder: its generation_config.json's sampling is every dataset's default"))
    trust_remote_code: bool = Field(default=False, description=(
        "load the tokenizer with the Python its folder ships (auto_map); the spec's model.trustRemoteCode"))
    input_roots: list[str] = Field(default_factory=list, description=(
        "folders every dataset file must really be in, symlinks followed (a pod's volumes); empty: anywhere"))
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    context: ContextConfig = Field(default_factory=ContextConfig)
    prompt_classes: list[PromptClass] = Field(default_factory=lambda: list(DEFAULT_PROMPT_CLASSES), min_length=1)
    datasets: list[DatasetConfig] = Field(min_length=1)
    progress_interval_s: float = Field(default=5.0, gt=0, description="fsync + publish cadence")
    at_budget: Literal[budget_shares.AT_BUDGET] = Field(
        default=budget_shares.CUT, description="the requests in flight when a replica's part is made: "
        "cut (partial responses kept, marked truncated) or abort (thrown away)")
    coordination: CoordinationConfig = Field(default_factory=CoordinationConfig)

    @property
    def server_is_ours(self) -> bool:
        """Whether draftgen started the server (its sidecar): one that already runs names its model."""
        return self.served_model_name is None

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
        if not has_one_catch_all(self.prompt_classes):
            raise ValueError("prompt_classes: exactly one class must have no max_prompt_tokens (it takes the rest)")
        for i, d in enumerate(self.datasets):
            if d.prompt_class is not None and d.prompt_class not in class_names:
                raise ValueError(f"datasets[{i}].prompt_class: {d.prompt_class!r} is not one of {class_names}")
            if not d.pretokenized and self.tokenizer_path is None:
                raise ValueError(f"datasets[{i}] ({d.name}) is not pretokenized, so tokenizer_path is required")
        return self

    def template_kwargs_for(self, dataset: DatasetConfig) -> dict[str, Any]:
        return {**self.chat_template_kwargs, **(dataset.chat_template_kwargs or {})}

    def coordination_directory(self) -> Path:
        return Path(self.coordination.directory or default_coordination_directory(self.output_root))

    def with_paths(self, where: Callable[[str], str]) -> GenerateConfig:
        """The same config with every path it names moved by `where` (a pod's paths -> this machine's)."""
        c = self.coordination
        return self.model_copy(update={
            "output_root": where(self.output_root),
            "tokenizer_path": where(self.tokenizer_path) if self.tokenizer_path else None,
            "model_path": where(self.model_path) if self.model_path else None,
            "input_roots": [where(root) for root in self.input_roots],
            "datasets": [d.model_copy(update={"path": where(d.path)}) for d in self.datasets],
            "coordination": c.model_copy(update={"directory": where(c.directory) if c.directory else None})})

    def to_document(self) -> dict[str, Any]:
        """The config as its file holds it (snake_case, JSON types): what jobrunner parses back."""
        return self.model_dump(mode="json")
