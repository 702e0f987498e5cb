"""Test builders: one way to make a spec, a progress report and a Job's observed state.

Modelled on JobSet's `pkg/util/testing/wrappers.go`: start from a minimal valid object, change only
what the test is about, then `.obj()` (a dict, as `kubectl apply` sends it), `.spec()` (the parsed
DatasetGenerationSpec) or the built value:

    spec = SpecBuilder().replicas(2).dataset("a", budget=1000).spec()
    report = progress(0, a=dataset_progress(600, state="Generating"))
    job = JobBuilder("x-gen-r000", "generate").config_hash("h1").active().state()
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from draftgen.api import DatasetGenerationSpec
from draftgen.observed import JobState
from draftgen_contracts import names
from draftgen_contracts.progress import DatasetProgress, ProgressDocument
from draftgen_contracts.states import DatasetState


class SpecBuilder:
    """A DatasetGeneration: one model claim, one SGLang server, and the datasets added (one "a" of
    1,000 tokens when none is)."""

    def __init__(self, name: str = "x"):
        self._obj: dict[str, Any] = {
            "apiVersion": names.API_VERSION, "kind": names.KIND, "metadata": {"name": name},
            "spec": {"model": {"claimName": "models", "path": "m"}, "server": {"image": "sglang"},
                     "output": {"claimName": "data"}}}

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
        self._spec["extraction"] = {"enabled": enabled, **fields}
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

    def deleting(self) -> JobBuilder:
        self._fields["deleting"] = True
        return self

    def state(self) -> JobState:
        return JobState(**self._fields)


def generation_jobs(name: str, replicas: int, digest: str | None = None, **fields: Any) -> dict[str, JobState]:
    """Every replica's generation Job, by name, in the same state."""
    jobs = {}
    for r in range(replicas):
        job_name = names.generation_job_name(name, r)
        jobs[job_name] = JobState(job_name, "generate", digest, **fields)
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
