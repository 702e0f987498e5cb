from prometheus_client import REGISTRY

from draftgen.api import DatasetEstimate, DatasetGenerationStatus, Estimate, ExtractionStatus
from draftgen_operator import metrics


def sample(metric: str, **labels) -> float | None:
    return REGISTRY.get_sample_value(metric, {"namespace": "ns", "name": "run", **labels})


def test_the_estimate_and_the_extraction_are_served_and_a_past_end_is_dropped():
    datasets = [DatasetEstimate(name="chat", reachable=True), DatasetEstimate(name="code", reachable=False)]
    estimate = Estimate(gpu_hours=71.1, extraction_gpu_hours=26.8, disk_bytes=13_831_573_680_232,
                        generation_ends="2026-12-07T12:00:00Z", datasets=datasets)
    status = DatasetGenerationStatus(estimate=estimate, extraction=ExtractionStatus(tokens=5, corpus_tokens=20))
    metrics.observe_estimate("ns", "run", status)
    assert sample("draftgen_estimate_generation_end_timestamp_seconds") == 1796644800.0
    assert sample("draftgen_estimate_gpu_hours") == 71.1 + 26.8
    assert sample("draftgen_estimate_disk_bytes") == 13_831_573_680_232
    assert (sample("draftgen_dataset_budget_reachable", dataset="chat"),
            sample("draftgen_dataset_budget_reachable", dataset="code")) == (1, 0)
    assert (sample("draftgen_extraction_tokens"), sample("draftgen_extraction_corpus_tokens")) == (5, 20)
    metrics.observe_estimate("ns", "run", status.model_copy(update={"estimate": estimate.model_copy(
        update={"generation_ends": None})}))
    assert sample("draftgen_estimate_generation_end_timestamp_seconds") is None
    metrics.forget("ns", "run")
    assert sample("draftgen_estimate_disk_bytes") is None


def test_a_replica_reports_its_time_until_it_has_finished():
    from draftgen_contracts.replica_status import ReplicaStatus
    running = DatasetGenerationStatus(replicas=[ReplicaStatus(index=0, report_time=1700000000.0),
                                                ReplicaStatus(index=1, report_time=1700000001.0, finished=True)])
    metrics.observe_replicas("ns", "run", running)
    assert sample("draftgen_replica_report_timestamp_seconds", replica="0") == 1700000000.0
    assert sample("draftgen_replica_report_timestamp_seconds", replica="1") is None
    running.replicas[0].finished = True
    metrics.observe_replicas("ns", "run", running)
    assert sample("draftgen_replica_report_timestamp_seconds", replica="0") is None
