"""Test builders: one way to make a spec, a generate config, a progress report and a Job's observed state.

Modelled on JobSet's `pkg/util/testing/wrappers.go`: start from a minimal valid object, change only
what the test is about, then `.obj()` (a dict, as `kubectl apply` sends it), `.spec()` (the parsed
DatasetGenerationSpec) or the built value:

    spec = SpecBuilder().replicas(2).dataset("a", budget=1000).spec()
    config = ConfigBuilder(server_url, out, tokenizer).dataset("a", prompts, budget=1000).config(startup_timeout_s=5)
    report = progress(0, a=dataset_progress(600, state="Generating"))
    job = JobBuilder("x-gen-r000", "generate").config_hash("h1").active().state()
    record = generation_record("a", row=3, response=[7] * 40, finish="length")
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import yaml

from draftgen import plan
from draftgen.api import Dataset, DatasetGenerationSpec
from draftgen.observed import JobState
from draftgen_contracts import names
from draftgen_contracts.generate_config import CoordinationConfig, GenerateConfig
from draftgen_contracts.generation_record import GenerationRecord, Timings
from draftgen_contracts.progress import DatasetProgress, ProgressDocument
from draftgen_contracts.states import DatasetState
from jobrunner.shared.config import DatasetConfig
from jobrunner.generate.dataset_budget import DatasetBudget
from jobrunner.generate.decode_clock import DecodeClock
from jobrunner.shared.output import OutputTotals


class SpecBuilder:
    """A DatasetGeneration: one model claim, one SGLang server, and the datasets added (one "a" of
    1,000 tokens when none is)."""

    def __init__(self, name: str = "x"):
        self._obj: dict[str, Any] = {
            "apiVersion": names.API_VERSION, "kind": names.KIND, "metadata": {"name": name},
            "spec": {"model": {"claimName": "models", "path": "m"}, "server": {"image": "sglang"},
                     "output": {"claimName": "data"}}}

    @classmethod
    def quickstart(cls, name: str = "quickstart") -> SpecBuilder:
        """examples/quickstart.yaml as the starting point: three datasets on the simulator."""
        builder = cls(name)
        builder._obj = example_manifest("quickstart")
        builder._obj["metadata"]["name"] = name
        return builder

    def budgets(self, *tokens: int) -> SpecBuilder:
        """Each dataset's budget in order; one number for every dataset."""
        datasets = self._spec["datasets"]
        for dataset, budget in zip(datasets, tokens * len(datasets) if len(tokens) == 1 else tokens, strict=True):
            dataset["budgetTokens"] = budget
        return self

    def server_args(self, *args: str, replace: dict[str, str] | None = None) -> SpecBuilder:
        """The server's arguments with `args` added and each value `replace` names changed."""
        server = self._spec["server"]
        server["args"] = [(replace or {}).get(a, a) for a in server.get("args", [])] + list(args)
        return self

    @property
    def _spec(self) -> dict[str, Any]:
        return self._obj["spec"]

    def replicas(self, n: int) -> SpecBuilder:
        self._spec["server"]["replicas"] = n
        return self

    def server(self, **fields: Any) -> SpecBuilder:
        self._spec["server"].update(fields)
        return self

    def model(self, **fields: Any) -> SpecBuilder:
        self._spec["model"].update(fields)
        return self

    def dataset(self, name: str, budget: int = 1000, path: str | None = None, **fields: Any) -> SpecBuilder:
        self._spec.setdefault("datasets", []).append({"name": name, "path": path or f"{name}.jsonl", "budgetTokens": budget,
                                       **fields})
        return self

    def extraction(self, enabled: bool = True, **fields: Any) -> SpecBuilder:
        self._spec.setdefault("extraction", {}).update(enabled=enabled, **fields)
        return self

    def set(self, **fields: Any) -> SpecBuilder:
        """Any other top-level spec field, camelCase as in a manifest."""
        self._spec.update(copy.deepcopy(fields))
        return self

    def obj(self) -> dict[str, Any]:
        obj = copy.deepcopy(self._obj)
        obj["spec"].setdefault("datasets", [{"name": "a", "path": "a.jsonl", "budgetTokens": 1000}])
        return obj

    def spec(self) -> DatasetGenerationSpec:
        return DatasetGenerationSpec.model_validate(self.obj()["spec"])


class ConfigBuilder:
    """A generate config as the plan writes it for a spec (SpecBuilder's, with the datasets added),
    pointed at this machine: the server's URL, the output root, the tokenizer and each dataset's file.
    `.config(**fields)` overrides what a test is about that no spec says (a short startup timeout,
    a fast progress interval, another replica)."""

    def __init__(self, server_url: str, output_root: str | Path, tokenizer_path: str | Path | None = None,
                 run_id: str = "test"):
        self._spec = SpecBuilder(run_id)
        self._where = {"server_url": server_url, "output_root": str(output_root), "run_id": run_id,
                       "tokenizer_path": str(tokenizer_path) if tokenizer_path else None}
        self._paths: dict[str, str] = {}
        self._config_only: dict[str, dict[str, Any]] = {}

    def dataset(self, name: str, path: str | Path, budget: int = 1000, **fields: Any) -> ConfigBuilder:
        """`fields`: the dataset's config fields (sample_cap, concurrency, ...). Those the spec's
        datasets[] also has go through the plan; the config's own (chat_template_kwargs, which only
        a hand-written config sets) are put over what it wrote."""
        in_spec = {k: v for k, v in fields.items() if k in Dataset.model_fields}
        self._spec.dataset(name, budget=budget, **in_spec)
        self._paths[name] = str(path)
        self._config_only[name] = {k: v for k, v in fields.items() if k not in in_spec}
        return self

    def change_spec(self, change) -> ConfigBuilder:
        """`change(spec_builder)`: anything else of the spec (replicas, prompt classes, atBudget)."""
        change(self._spec)
        return self

    def config(self, **fields: Any) -> GenerateConfig:
        built = plan.generate_config(self._spec.spec(), coordination=CoordinationConfig(kind="file"),
                                     progress_interval_s=plan.REPORT_INTERVAL_S, dataset_paths=self._paths,
                                     **self._where)
        document = built.model_dump()
        for dataset in document["datasets"]:
            dataset.update(self._config_only[dataset["name"]])
        # A test's files lie anywhere on this machine, not under the pod's volumes (the plan's roots).
        return GenerateConfig.model_validate({**document, "input_roots": [], **fields})


def generate_config(server_url: str, output_root: str | Path, tokenizer_path: str | Path | None,
                    datasets: list[dict[str, Any]], **fields: Any) -> GenerateConfig:
    """ConfigBuilder's config of these datasets, each given by its config fields (name, path,
    budget_tokens and any other), with `fields` over it."""
    builder = ConfigBuilder(server_url, output_root, tokenizer_path)
    for d in map(dict, datasets):
        builder.dataset(d.pop("name"), d.pop("path"), d.pop("budget_tokens"), **d)
    return builder.config(**fields)


def dataset_progress(tokens: int = 0, samples: int = 1, state: DatasetState | str = DatasetState.GENERATING,
                     **fields: Any) -> DatasetProgress:
    return DatasetProgress(completion_tokens=tokens, samples=samples, state=state, **fields)


def progress(replica: int, replicas: int = 1, updated_at: float | None = None, finished: bool = False,
             error: str | None = None, **datasets: DatasetProgress | int) -> ProgressDocument:
    """One replica's report; a dataset given as an int is that many tokens in one sample, Generating."""
    return ProgressDocument(
        replica=replica, replicas=max(replicas, replica + 1),
        updated_at=100.0 + replica if updated_at is None else updated_at, finished=finished, error=error,
        datasets={n: dataset_progress(d) if isinstance(d, int) else d for n, d in datasets.items()})


class JobBuilder:
    """What the reconcile sees of one Job."""

    def __init__(self, name: str, component: str):
        self._fields: dict[str, Any] = {"name": name, "component": component}

    def config_hash(self, digest: str) -> JobBuilder:
        self._fields["config_hash"] = digest
        return self

    def active(self, pods: int = 1) -> JobBuilder:
        self._fields["active"] = pods
        return self

    def succeeded(self) -> JobBuilder:
        self._fields.update(succeeded=True, active=0)
        return self

    def failed(self, reason: str = "BackoffLimitExceeded", message: str = "") -> JobBuilder:
        self._fields.update(failed=True, active=0, failure_reason=reason, failure_message=message)
        return self

    def queued(self, queue: str, since: str) -> JobBuilder:
        """Held suspended by Kueue in this LocalQueue since then."""
        self._fields.update(suspended=True, suspended_since=since, queue=queue, active=0)
        return self

    def deleting(self) -> JobBuilder:
        self._fields["deleting"] = True
        return self

    def replica(self, index: int) -> JobBuilder:
        self._fields["replica"] = index
        return self

    def state(self) -> JobState:
        return JobState(**self._fields)


def generation_jobs(name: str, replicas: int, digest: str | None = None, **fields: Any) -> dict[str, JobState]:
    """Every replica's generation Job, by name, in the same state."""
    jobs = {}
    for r in range(replicas):
        job_name = names.generation_job_name(name, r)
        jobs[job_name] = JobState(job_name, "generate", digest, replica=r, **fields)
    return jobs


# Shaped like moonshotai/Kimi-K2.5's config.json: a multimodal wrapper with the DeepSeek-V3-style
# text model nested under text_config (hidden size 7,168, 61 layers, vocabulary 163,840).
KIMI_K25_CONFIG = {
    "architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25", "vision_config": {"hidden_size": 1152},
    "text_config": {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168, "num_hidden_layers": 61,
                    "vocab_size": 163840, "max_position_embeddings": 262144}}

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_manifest(name: str = "quickstart") -> dict[str, Any]:
    """examples/<name>.yaml's DatasetGeneration, as a user would apply it."""
    documents = yaml.safe_load_all((EXAMPLES / f"{name}.yaml").read_text())
    return next(d for d in documents if isinstance(d, dict) and d.get("kind") == names.KIND)


def generation_record(dataset: str = "a", row: int = 0, prompt: list[int] | None = None,
                      response: list[int] | None = None, finish: str = "stop", **fields: Any) -> GenerationRecord:
    """A record as generate writes it: `prompt` and `response` ([1, 2] and [7, 7, 7] unless given)
    with their counts, the sample id of (dataset, row), a time per row; `fields` replace any other."""
    prompt = [1, 2] if prompt is None else prompt
    response = [7, 7, 7] if response is None else response
    record = GenerationRecord(
        sample_id=names.sample_id(dataset, row), dataset=dataset, row=row, input_ids=prompt, output_ids=response,
        finish_reason=finish, prompt_tokens=len(prompt), completion_tokens=len(response), prompt_class="short",
        sampling_params={"max_new_tokens": 64}, rid=f"r-{dataset}-{row}", timings=Timings(0.0, 0.1, 1000.0 + row))
    return dataclasses.replace(record, **fields)


def dataset_budget(name: str = "a", budget_tokens: int = 1000, replicas: int = 2, replica: int = 1, cut: bool = True,
                   made: int = 0, speed: float = 0.0, clock: DecodeClock | None = None, sample_cap: int | None = None,
                   **fields: Any) -> DatasetBudget:
    """Replica `replica` of `replicas` on a budget whose receiver is looked for at replica 0 (responses
    of up to 1000 tokens), with `made` tokens written already and a decode clock (`clock`, or a new one)
    that saw requests make `speed` tokens/s; `fields` go to DatasetBudget."""
    clock = clock or DecodeClock(0.0, bin_s=0.05)
    if speed:
        clock.observe(0.0, 1.0, round(speed))
    budget = DatasetBudget(DatasetConfig(name=name, path="unused.jsonl", budget_tokens=budget_tokens), OutputTotals(),
                           clock, sample_cap=sample_cap, max_new_tokens=1000, replicas=replicas, replica=replica,
                           cuts_at_budget=cut, **fields)
    if made:
        budget.totals.add_record(generation_record(name, 10_000, [1, 2, 3], [7] * made), 0)
    return budget
