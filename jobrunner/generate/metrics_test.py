from prometheus_client import CollectorRegistry, generate_latest

from draftgen_contracts.progress import DatasetProgress, ProgressDocument
from jobrunner.generate.metrics import ProgressCollector


def scrape(document) -> str:
    registry = CollectorRegistry()
    registry.register(ProgressCollector("qs", lambda: document))
    return generate_latest(registry).decode()


def test_a_scrape_shows_the_last_published_progress_per_dataset():
    doc = ProgressDocument(replica=1, replicas=2, updated_at=1.0, datasets={"chat": DatasetProgress(
        state="Generating", completion_tokens=1234, samples=7, skipped_by_reason={"too_long": 2}, in_flight=3,
        budget_tokens=5000)})
    text = scrape(doc)
    key = 'dataset="chat",name="qs",replica="1"'
    assert f"draftgen_generate_completion_tokens_total{{{key}}} 1234.0" in text
    assert 'draftgen_generate_rows_skipped_total{dataset="chat",name="qs",reason="too_long",replica="1"} 2.0' in text
    assert f"draftgen_generate_in_flight{{{key}}} 3.0" in text
    assert f'draftgen_generate_dataset_state{{{key},state="Generating"}} 1.0' in text
    assert f'draftgen_generate_dataset_state{{{key},state="BudgetMet"}} 0.0' in text


def test_before_the_first_report_the_families_exist_without_samples():
    text = scrape(None)
    assert "# TYPE draftgen_generate_budget_tokens gauge" in text and "replica=" not in text
