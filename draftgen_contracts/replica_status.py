"""`status.replicas[]` of a DatasetGeneration: each generation replica's last report as the operator
folded it, for people and tools reading the object (the replicas read one another's reports from
their ConfigMaps: jobrunner.shared.coordination_kube).

Written by the operator's fold (draftgen.fold.fold_replicas); the CRD's schema is generated from it.
camelCase, as the status is.

    replicas:
    - index: 1
      reportTime: 1700000000.0
      finished: false
      datasets:
      - {name: chat, tokens: 5100, state: Generating, settled: true, budgetTokens: 10000}
      nodes: [gpu-node-3, gpu-node-7]
      groupRestarts: 0
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .progress import DatasetProgress, ProgressDocument
from .states import DatasetState

# The status's list of datasets is a map keyed by name (one entry per name, merged by name).
_BY_NAME = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}


class _Status(BaseModel):
    # A reader ignores fields it does not know: an operator newer than a replica's image may add some.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class ReplicaDatasetStatus(_Status):
    """One replica's part of one dataset, as its last report said: what the other replicas read to
    share the budget (docs/budgets.md)."""

    name: str
    tokens: int = 0
    state: DatasetState = DatasetState.PENDING
    settled: bool = Field(False, description="Sends no more for this dataset, nothing in flight: tokens are final.")
    budget_tokens: int = Field(0, description="The budget the report was made under.")

    @classmethod
    def of(cls, name: str, report: DatasetProgress) -> ReplicaDatasetStatus:
        return cls(name=name, tokens=report.completion_tokens, state=report.state, settled=report.settled,
                   budget_tokens=report.budget_tokens)


class ReplicaStatus(_Status):
    """The last report folded from one generation replica."""

    index: int
    report_time: float | None = Field(None, description="The report's own timestamp (Unix seconds).")
    finished: bool = False
    datasets: list[ReplicaDatasetStatus] = Field(default_factory=list, json_schema_extra=_BY_NAME)
    nodes: list[str] = Field(default_factory=list, description=(
        "The nodes its pods run on, by rank (one per node; a replica across nodes has several)."))
    group_restarts: int = Field(0, description=(
        "Times its group of nodes failed and was started again as one (server.nodesPerReplica > 1)."))

    @classmethod
    def of(cls, index: int, report: ProgressDocument | None, datasets: list[str], nodes: list[str] | None = None,
           group_restarts: int = 0) -> ReplicaStatus:
        """A replica's report (None: none yet), with its entries of `datasets` (the spec's, in its order)."""
        said = [ReplicaDatasetStatus.of(name, report.datasets[name]) for name in datasets
                if report is not None and name in report.datasets]
        return cls(index=index, report_time=report.updated_at if report else None,
                   finished=report.finished if report else False, datasets=said, nodes=nodes or [],
                   group_restarts=group_restarts)

