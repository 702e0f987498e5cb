"""Prometheus metrics of the operator (served on DRAFTGEN_METRICS_PORT, default 9090)."""

from __future__ import annotations

import datetime as dt
import os
import time

from prometheus_client import Counter, Gauge, start_http_server

from draftgen.api import DatasetGenerationStatus
from draftgen_contracts.states import Phase
from draftgen_contracts.timestamps import FORMAT

TOKENS = Gauge("draftgen_dataset_tokens", "Kept completion tokens per dataset", ["namespace", "name", "dataset"])
BUDGET = Gauge("draftgen_dataset_budget_tokens", "Token budget per dataset", ["namespace", "name", "dataset"])
PHASE = Gauge("draftgen_phase", "1 for the DatasetGeneration's current phase", ["namespace", "name", "phase"])
JOBS_ACTIVE = Gauge("draftgen_jobs_active", "Active pods of the DatasetGeneration's Jobs", ["namespace", "name"])
SAMPLES = Gauge("draftgen_dataset_samples", "Kept samples per dataset", ["namespace", "name", "dataset"])
READY = Gauge("draftgen_ready_replicas", "Generation replicas whose server is ready", ["namespace", "name"])
GPUS = Gauge("draftgen_generation_gpus", "GPUs held by scheduled generation pods", ["namespace", "name"])
GPU_SECONDS = Counter("draftgen_generation_gpu_seconds", "GPU-seconds held by generation pods (since the operator "
                      "started)", ["namespace", "name"])
RECONCILE_ERRORS = Counter("draftgen_reconcile_errors_total", "Reconciles that raised or had a write refused",
                           ["namespace", "name"])
# status.estimate and status.extraction (docs/preflight.md#the-estimate), for dashboards and alerts.
REACHABLE = Gauge("draftgen_dataset_budget_reachable", "1 while the dataset's usable rows may reach its budget",
                  ["namespace", "name", "dataset"])
GENERATION_ENDS = Gauge("draftgen_estimate_generation_end_timestamp_seconds",
                        "Projected end of generation (Unix seconds; once the rate is measured)", ["namespace", "name"])
GPU_HOURS = Gauge("draftgen_estimate_gpu_hours", "Projected GPU-hours of generation and extraction",
                  ["namespace", "name"])
DISK = Gauge("draftgen_estimate_disk_bytes", "Projected bytes on the output volume", ["namespace", "name"])
EXTRACTED = Gauge("draftgen_extraction_tokens", "Tokens whose hidden states are stored", ["namespace", "name"])
TO_EXTRACT = Gauge("draftgen_extraction_corpus_tokens", "Tokens of the corpus the extraction reads",
                   ["namespace", "name"])
REPORTED = Gauge("draftgen_replica_report_timestamp_seconds", "When the generation replica last reported (Unix "
                 "seconds, its own clock); no sample once it has finished", ["namespace", "name", "replica"])
# 1 on the replica that holds the leader Lease (or the only one), 0 on a standby: "operator down" is
# no replica reporting 1 (charts/draftgen/files/alerts.yaml).
LEADER = Gauge("draftgen_operator_leader", "1 while this operator replica reconciles, 0 while it stands by")
ALL = (TOKENS, BUDGET, PHASE, JOBS_ACTIVE, SAMPLES, READY, GPUS, GPU_SECONDS, RECONCILE_ERRORS, REACHABLE,
       GENERATION_ENDS, GPU_HOURS, DISK, EXTRACTED, TO_EXTRACT, REPORTED)

_last_observed: dict[tuple[str, str], tuple[float, int]] = {}  # (namespace, name) -> (monotonic time, GPUs then)


def serve() -> None:
    port = int(os.environ.get("DRAFTGEN_METRICS_PORT", "9090"))
    if port:
        start_http_server(port, addr=os.environ.get("DRAFTGEN_METRICS_ADDR", "0.0.0.0"))


def gpus_held(pods, gpus_per_replica: int) -> int:
    """GPUs the run holds: every scheduled generation pod has its node's GPUs, loading or not."""
    return sum(1 for p in pods or () if p.scheduled and not p.deleting) * gpus_per_replica


def observe(namespace: str, name: str, status: DatasetGenerationStatus, jobs, gpus: int) -> None:
    for d in status.datasets:
        if d.tokens is not None:  # not reported yet: no sample rather than a 0 that would fall
            TOKENS.labels(namespace, name, d.name).set(d.tokens)
            SAMPLES.labels(namespace, name, d.name).set(d.samples or 0)
        BUDGET.labels(namespace, name, d.name).set(d.budget_tokens)
    for phase in Phase:
        PHASE.labels(namespace, name, phase).set(1 if status.phase == phase else 0)
    JOBS_ACTIVE.labels(namespace, name).set(sum(j.active for j in jobs))
    READY.labels(namespace, name).set(status.ready_replicas or 0)
    GPUS.labels(namespace, name).set(gpus)
    observe_replicas(namespace, name, status)
    observe_estimate(namespace, name, status)
    # The GPUs seen at the last fold were held until this one.
    now, key = time.monotonic(), (namespace, name)
    before = _last_observed.get(key)
    GPU_SECONDS.labels(namespace, name).inc(before[1] * (now - before[0]) if before else 0.0)
    _last_observed[key] = (now, gpus)


def observe_replicas(namespace: str, name: str, status: DatasetGenerationStatus) -> None:
    """Each unfinished replica's last report time: an alert fires on one that stops reporting."""
    for r in status.replicas:
        if r.report_time is not None and not r.finished:
            REPORTED.labels(namespace, name, str(r.index)).set(r.report_time)
        elif (namespace, name, str(r.index)) in REPORTED._metrics:
            REPORTED.remove(namespace, name, str(r.index))


def observe_estimate(namespace: str, name: str, status: DatasetGenerationStatus) -> None:
    """The estimate's and the extraction's numbers; a projected end only while there is one."""
    if (e := status.estimate) is not None:
        for d in e.datasets:
            REACHABLE.labels(namespace, name, d.name).set(1 if d.reachable else 0)
        if e.generation_ends:
            GENERATION_ENDS.labels(namespace, name).set(unix_seconds(e.generation_ends))
        elif (namespace, name) in GENERATION_ENDS._metrics:  # generation over: no end to project
            GENERATION_ENDS.remove(namespace, name)
        GPU_HOURS.labels(namespace, name).set(e.gpu_hours + e.extraction_gpu_hours)
        DISK.labels(namespace, name).set(e.disk_bytes)
    if (x := status.extraction) is not None:
        EXTRACTED.labels(namespace, name).set(x.tokens)
        TO_EXTRACT.labels(namespace, name).set(x.corpus_tokens)


def unix_seconds(rfc3339: str) -> float:
    return dt.datetime.strptime(rfc3339, FORMAT).replace(tzinfo=dt.timezone.utc).timestamp()


def forget(namespace: str, name: str) -> None:
    _last_observed.pop((namespace, name), None)
    for metric in ALL:
        for labels in list(metric._metrics):  # prometheus_client keeps children by label tuple
            if labels[:2] == (namespace, name):
                metric.remove(*labels)
