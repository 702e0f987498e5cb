"""Prometheus metrics of one `jobrunner generate` process (`--metrics-address HOST:PORT`; the
generation pods serve them on $(POD_IP):9400, container port `metrics`). Every value is read from the
last progress document the engine published (every `progress_interval_s`), so a scrape never races
the event loop: what a scrape shows is what the operator was last told. docs/metrics.md lists them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from draftgen_contracts.progress import ProgressDocument
from draftgen_contracts.states import DatasetState

LABELS = ["name", "replica", "dataset"]


class ProgressCollector:
    """Metric families from a callable returning the last published progress document (None before)."""

    def __init__(self, run_id: str, last_progress):
        self.run_id = run_id
        self.last_progress = last_progress

    def collect(self):
        doc: ProgressDocument | None = self.last_progress()
        tokens = CounterMetricFamily("draftgen_generate_completion_tokens", "Kept completion tokens this replica "
                                     "wrote for the dataset (resumed output included)", labels=LABELS)
        samples = CounterMetricFamily("draftgen_generate_samples", "Samples this replica wrote", labels=LABELS)
        truncated = CounterMetricFamily("draftgen_generate_truncated", "Samples cut at max new tokens", labels=LABELS)
        skipped = CounterMetricFamily("draftgen_generate_rows_skipped", "Dataset rows skipped, by reason",
                                      labels=[*LABELS, "reason"])
        in_flight = GaugeMetricFamily("draftgen_generate_in_flight", "Requests at the server now", labels=LABELS)
        budget = GaugeMetricFamily("draftgen_generate_budget_tokens", "The dataset's token budget (all replicas)",
                                   labels=LABELS)
        speed = GaugeMetricFamily("draftgen_generate_tokens_per_second", "This replica's recent kept tokens per "
                                  "second for the dataset", labels=LABELS)
        state = GaugeMetricFamily("draftgen_generate_dataset_state", "1 for the dataset's state on this replica",
                                  labels=[*LABELS, "state"])
        for dataset, p in (doc.datasets.items() if doc else ()):
            key = [self.run_id, str(doc.replica), dataset]
            tokens.add_metric(key, p.completion_tokens)
            samples.add_metric(key, p.samples)
            truncated.add_metric(key, p.truncated)
            for reason, count in sorted(p.skipped_by_reason.items()):
                skipped.add_metric([*key, reason], count)
            in_flight.add_metric(key, p.in_flight)
            budget.add_metric(key, p.budget_tokens)
            speed.add_metric(key, p.tokens_per_second)
            for s in DatasetState:
                state.add_metric([*key, s.value], 1.0 if p.state == s else 0.0)
        yield from (tokens, samples, truncated, skipped, in_flight, budget, speed, state)


def serve(address: str, run_id: str, last_progress) -> None:
    """Serve the metrics on `address` (HOST:PORT) from a daemon thread."""
    host, _, port = address.rpartition(":")
    registry = CollectorRegistry()
    registry.register(ProgressCollector(run_id, last_progress))
    start_http_server(int(port), addr=host or "127.0.0.1", registry=registry)
