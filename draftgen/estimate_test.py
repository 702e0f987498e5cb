"""The estimate as a pure function: priors before the first responses, measured lengths and rates
after, what extraction will store, and the budgets out of reach of their rows."""

from draftgen.api import DatasetStatus, ExtractionStatus, Preflight
from draftgen.estimate import MEASURED_AFTER_SAMPLES, budgets_out_of_reach, estimate
from draftgen_contracts.hidden_state_layout import bytes_per_token
from draftgen_contracts.preflight_report import DatasetReport, ModelReport
from draftgen_contracts.states import DatasetState
from draftgen_dev.builders import SpecBuilder

NOW = "2026-12-01T00:00:00Z"
SPEC = (SpecBuilder().replicas(2).server(expectedTokensPerSecond=1000).dataset("a", budget=100_000)
        .extraction(maxLength=4096).spec())


def found(rows=1000, prompt_tokens=200_000, expected=500_000, name="a"):
    """The preflight of dataset `name`: `rows` usable rows, 200 prompt tokens and a prior of 500 per row."""
    return Preflight(model=ModelReport(hidden_size=64, num_layers=8, vocab_size=512),
                     datasets=[DatasetReport(name=name, rows=rows, usable_rows=rows, prompt_tokens=prompt_tokens,
                                             expected_response_tokens=expected)])


def status(tokens, samples, state=DatasetState.GENERATING, tps=0.0, name="a"):
    return DatasetStatus(name=name, budget_tokens=100_000, tokens=tokens, samples=samples, state=state,
                         tokens_per_second=tps)


def test_before_the_preflight_lengths_come_from_max_new_tokens_and_no_bytes_are_claimed():
    e = estimate(SPEC, None, [], None, NOW)
    [a] = e.datasets
    # The default classes' max new tokens (10,240 and 16,384) halved and averaged.
    assert a.length_basis == "prior" and a.mean_response_tokens == 6656 and a.response_tokens == 100_000
    assert e.hidden_state_bytes == 0 and e.prompt_tokens == 0 and "no preflight yet" in e.assumptions
    # 100,000 tokens at 2 x 1,000 tokens/s: 50 s of generation on 16 GPUs.
    assert e.rate_basis == "expected" and e.tokens_per_second == 2000 and e.generation_ends is None
    assert e.generation_hours == round(50 / 3600, 2) and e.gpu_hours == round(50 / 3600 * 16, 1)


def test_with_the_preflight_the_corpus_counts_prompt_tokens_and_the_model_sizes_the_states():
    e = estimate(SPEC, found(), [], None, NOW, hidden_size=64)
    [a] = e.datasets
    # The prior is 500 tokens a response: 200 samples, each with its 200-token prompt.
    assert a.samples == 200 and e.prompt_tokens == 40_000 and e.corpus_tokens == 140_000
    assert e.hidden_state_bytes == 140_000 * bytes_per_token(64, 3, "bf16") and e.hidden_state_size == "72.9 MB"
    # The extraction reads what it stores at its expected 10,000 tokens/s, on its 8 GPUs.
    assert e.extraction_hours == round(140_000 / 10_000 / 3600, 2) and "extraction at 10,000 tokens/s" in e.assumptions
    assert e.extraction_gpu_hours == round(140_000 / 10_000 / 3600 * 8, 1)


def test_the_extraction_pods_measured_rate_replaces_the_expected_one_once_it_reports():
    expected = estimate(SPEC, found(), [], None, NOW, hidden_size=64)
    assert expected.extraction_rate_basis == "expected" and expected.extraction_tokens_per_second == 10_000
    loading = ExtractionStatus(tokens=0, corpus_tokens=140_000, tokens_per_second=0.0)  # no batch stored yet
    assert estimate(SPEC, found(), [], None, NOW, hidden_size=64, extraction=loading) == expected
    measured = estimate(SPEC, found(), [], None, NOW, hidden_size=64,
                        extraction=ExtractionStatus(tokens=7_000, corpus_tokens=140_000, tokens_per_second=500.0,
                                                    report_time=NOW))
    assert measured.extraction_rate_basis == "measured" and measured.extraction_tokens_per_second == 500
    assert measured.extraction_hours == round(140_000 / 500 / 3600, 2) and "extraction at 500 tokens/s (measured)" \
        in measured.assumptions
    assert measured.extraction_gpu_hours == round(140_000 / 500 / 3600 * 8, 1)
    # Running: the corpus's tokens not stored yet (133,000) at 500 tokens/s from the report's time;
    # none once it has finished.
    assert measured.extraction_ends == "2026-12-01T00:04:26Z" and expected.extraction_ends is None
    done = ExtractionStatus(tokens=140_000, corpus_tokens=140_000, tokens_per_second=500.0, finished=True)
    assert estimate(SPEC, found(), [], None, NOW, hidden_size=64, extraction=done).extraction_ends is None
    off = estimate(SpecBuilder().dataset("a", budget=100_000).spec(), found(), [], None, NOW, hidden_size=64)
    assert off.extraction_tokens_per_second == 0 and off.extraction_hours == 0


def test_measured_lengths_replace_the_prior_once_enough_responses_exist():
    few = estimate(SPEC, found(), [status(2000, MEASURED_AFTER_SAMPLES - 1)], None, NOW, hidden_size=64)
    assert few.datasets[0].length_basis == "prior"
    many = estimate(SPEC, found(), [status(4000, 40)], None, NOW, hidden_size=64)
    [a] = many.datasets
    assert a.length_basis == "measured" and a.mean_response_tokens == 100 and a.samples == 1000
    assert many.prompt_tokens == 200_000  # every row's prompt, since 1,000 samples of 100 take them all


def test_rows_too_few_at_the_measured_length_warn_that_the_dataset_will_run_out():
    datasets = [status(4000, 40)]
    e = estimate(SPEC, found(rows=500, prompt_tokens=100_000), datasets, None, NOW, hidden_size=64)
    [a] = e.datasets
    assert not a.reachable and a.response_tokens == 50_000
    assert budgets_out_of_reach(SPEC, e, found(rows=500), datasets) == (
        "a: 500 usable rows x about 100 tokens (measured over 40 responses) may give about 50,000 tokens of its "
        "100,000: it will be Exhausted at about 50,000 tokens")
    ran_out = [status(50_000, 500, state=DatasetState.EXHAUSTED)]
    e = estimate(SPEC, found(rows=500), ran_out, e, NOW, hidden_size=64)
    assert budgets_out_of_reach(SPEC, e, found(rows=500), ran_out) == (
        "a: its rows ran out at 50,000 tokens of its 100,000 (Exhausted)")


def test_a_budget_in_reach_says_nothing_and_a_met_one_ends_at_what_was_kept():
    assert budgets_out_of_reach(SPEC, estimate(SPEC, found(), [], None, NOW), found(), []) is None
    met = [status(100_400, 800, state=DatasetState.BUDGET_MET)]
    e = estimate(SPEC, found(rows=100), met, None, NOW, hidden_size=64)
    assert e.datasets[0].response_tokens == 100_400 and e.datasets[0].reachable and e.generation_hours == 0


def test_the_measured_rate_projects_the_end_and_outlives_a_pause_in_reports():
    datasets = [status(40_000, 400, tps=500.0)]
    e = estimate(SPEC, found(), datasets, None, NOW, hidden_size=64)
    # 60,000 tokens left at 500 tokens/s: 120 s.
    assert e.rate_basis == "measured" and e.tokens_per_second == 500
    assert e.generation_ends == "2026-12-01T00:02:00Z"
    paused = estimate(SPEC, found(), [status(40_000, 400)], e, NOW, hidden_size=64)
    assert paused.rate_basis == "measured" and paused.tokens_per_second == 500


def test_a_sample_cap_and_the_extraction_length_limit_bound_what_is_stored():
    capped = SpecBuilder().dataset("a", budget=100_000, sampleCap=50).extraction(maxLength=600).spec()
    e = estimate(capped, found(), [], None, NOW, hidden_size=64)
    # 50 samples of 500 response tokens; each 700-token sample is cut at 600 for extraction.
    assert e.datasets[0].response_tokens == 25_000 and e.corpus_tokens == 35_000
    assert e.hidden_state_bytes == 50 * 600 * bytes_per_token(64, 3, "bf16")
    skipped = SpecBuilder().dataset("a", budget=100_000, sampleCap=50).extraction(maxLength=600, tooLong="skip").spec()
    assert estimate(skipped, found(), [], None, NOW, hidden_size=64).hidden_state_bytes == 0


def test_without_extraction_no_state_bytes():
    plain = SpecBuilder().dataset("a", budget=100_000).spec()
    e = estimate(plain, found(), [], None, NOW, hidden_size=64)
    assert e.hidden_state_bytes == 0 and e.extraction_hours == 0 and e.extraction_gpu_hours == 0


# The Kimi-K2.5 example (examples/kimi-k25-eagle3.yaml) before its first response: the model's facts
# from a config.json shaped like the published one, and stated preflight findings, 100,000 usable
# rows per dataset with mean prompts of 600 tokens (12,000 for the SWE traces of the long class).
KIMI_PROMPT_TOKENS = {"swe-agent": 12_000}


def kimi_estimate(tmp_path):
    import json

    from draftgen.api import DatasetGenerationSpec
    from draftgen_dev.builders import KIMI_K25_CONFIG, example_manifest
    from jobrunner.preflight.model_facts import model_facts

    (tmp_path / "config.json").write_text(json.dumps(KIMI_K25_CONFIG))
    facts = model_facts(tmp_path)
    spec = DatasetGenerationSpec.model_validate(example_manifest("kimi-k25-eagle3")["spec"])
    rows = 100_000
    found = Preflight(model=ModelReport(hidden_size=facts.hidden_size, num_layers=facts.num_layers), datasets=[
        DatasetReport(name=d.name, rows=rows, usable_rows=rows,
                      prompt_tokens=rows * KIMI_PROMPT_TOKENS.get(d.name, 600),
                      expected_response_tokens=rows * (8192 if d.prompt_class == "long" else 5120))
        for d in spec.datasets])
    return estimate(spec, found, [], None, NOW, hidden_size=facts.hidden_size)


def estimate_table(e) -> str:
    rows = [("response tokens", f"{e.response_tokens:,}"), ("of them generated", f"{e.generated_tokens:,}"),
            ("prompt tokens", f"{e.prompt_tokens:,}"),
            ("corpus tokens", f"{e.corpus_tokens:,}"), ("hidden-state bytes", f"{e.hidden_state_bytes:,} ({e.hidden_state_size})"),
            ("rate", f"{e.tokens_per_second:,.0f} tokens/s ({e.rate_basis})"),
            ("generation", f"{e.generation_hours} h, {e.gpu_hours} GPU-hours"),
            ("extraction", f"{e.extraction_hours} h, {e.extraction_gpu_hours} GPU-hours"),
            ("exports", f"{e.export_bytes:,} bytes, {e.export_hours} h"), ("disk", f"{e.disk_bytes:,} ({e.disk_size})")]
    return "\n".join(f"| {k} | {v} |" for k, v in rows)


def test_the_kimi_k25_example_in_the_docs_is_what_the_estimate_computes(tmp_path):
    from pathlib import Path

    e = kimi_estimate(tmp_path)
    assert e.response_tokens == 100_000_000 and e.datasets[0].mean_response_tokens == 5120
    # 8 x 10M generated (the two datasets of traces are not) at 4 replicas x 2,500 tokens/s: 8,000 s on 32 GPUs.
    assert e.generated_tokens == 80_000_000 and e.generation_hours == 2.22 and e.gpu_hours == 71.1
    docs = (Path(__file__).resolve().parents[1] / "docs" / "preflight.md").read_text()
    assert estimate_table(e) in docs, "docs/preflight.md's Kimi-K2.5 table is stale:\n" + estimate_table(e)


def test_a_finished_dataset_is_sized_by_its_own_responses_however_few():
    # 10 responses of 120 tokens, met: its 10 samples store 200 + 120 tokens each, not the prior's 500.
    e = estimate(SPEC, found(), [status(1200, 10, state=DatasetState.BUDGET_MET)], None, NOW, hidden_size=64)
    [a] = e.datasets
    assert a.length_basis == "measured" and a.samples == 10 and e.corpus_tokens == 10 * 200 + 1200
    assert e.hidden_state_bytes == 10 * 320 * bytes_per_token(64, 3, "bf16")


def test_existing_traces_count_in_the_corpus_but_not_in_the_rate_or_the_gpu_hours():
    spec = (SpecBuilder().server(expectedTokensPerSecond=1000).dataset("a", budget=100_000)
            .dataset("t", budget=50_000, kind="traces").spec())
    both = Preflight(datasets=[*found().datasets, *found(name="t").datasets])
    e = estimate(spec, both, [status(10_000, 100, tps=500.0), status(20_000, 200, tps=90_000.0, name="t")],
                 None, NOW)
    assert e.response_tokens == 150_000 and e.generated_tokens == 100_000
    # 90,000 tokens left of "a" at its own 500 tokens/s: the traces' write rate is no server's.
    assert e.tokens_per_second == 500 and e.generation_ends == "2026-12-01T00:03:00Z"


def test_the_state_bytes_follow_the_layers_the_drafters_read_and_each_drafters_export():
    """8 layers: eagle3 and dflash together store 5 aux layers; specforge exports both, speculators
    all three (its MTP layout repeats the final state)."""
    from draftgen_contracts.hidden_state_layout import export_bytes

    spec = (SpecBuilder().dataset("a", budget=100_000)
            .extraction(maxLength=4096, drafters=["eagle3", "dflash", "mtp"], finalState="pre-norm",
                        exports=["speculators"]).spec())
    e = estimate(spec, found(), [], None, NOW, hidden_size=64)
    assert e.hidden_state_bytes == 140_000 * bytes_per_token(64, 5, "bf16")
    assert "5 aux layers" in e.assumptions
    states = sum(export_bytes("speculators", 140_000, 200, 64, aux, "bf16") for aux in (3, 5, 1))
    assert e.export_bytes == states


def test_a_replica_across_nodes_holds_every_nodes_gpus():
    two_nodes = SPEC.model_copy(update={"server": SPEC.server.model_copy(update={"nodes_per_replica": 2})})
    e = estimate(two_nodes, None, [], None, NOW)
    assert e.gpu_hours == round(50 / 3600 * 32, 1)  # the same rate (rank 0 serves), twice the GPUs
