"""Prometheus metrics of the operator (served on DRAFTGEN_METRICS_PORT, default 9090)."""

from __future__ import annotations

import os

from prometheus_client import Counter, Gauge, start_http_server

from draftgen.api import DatasetGenerationStatus
from draftgen_contracts.states import Phase

TOKENS = Gauge("draftgen_dataset_tokens", "Kept completion tokens per dataset", ["namespace", "name", "dataset"])
BUDGET = Gauge("draftgen_dataset_budget_tokens", "Token budget per dataset", ["namespace", "name", "dataset"])
PHASE = Gauge("draftgen_phase", "1 for the DatasetGeneration's current phase", ["namespace", "name", "phase"])
JOBS_ACTIVE = Gauge("draftgen_jobs_active", "Active pods of the DatasetGeneration's Jobs", ["namespace", "name"])
RECONCILE_ERRORS = Counter("draftgen_reconcile_errors_total", "Reconciles that raised", ["namespace", "name"])


def serve() -> None:
    port = int(os.environ.get("DRAFTGEN_METRICS_PORT", "9090"))
    if port:
        start_http_server(port, addr=os.environ.get("DRAFTGEN_METRICS_ADDR", "0.0.0.0"))


def observe(namespace: str, name: str, status: DatasetGenerationStatus, jobs) -> None:
    for d in status.datasets:
        TOKENS.labels(namespace, name, d.name).set(d.tokens)
        BUDGET.labels(namespace, name, d.name).set(d.budget_tokens)
    for phase in Phase:
        PHASE.labels(namespace, name, phase).set(1 if status.phase == phase else 0)
    JOBS_ACTIVE.labels(namespace, name).set(sum(j.active for j in jobs))


def forget(namespace: str, name: str) -> None:
    for gauge in (TOKENS, BUDGET, PHASE, JOBS_ACTIVE, RECONCILE_ERRORS):
        for labels in list(gauge._metrics):  # prometheus_client keeps children by label tuple
            if labels[:2] == (namespace, name):
                gauge.remove(*labels)
