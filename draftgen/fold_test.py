from draftgen.api import DatasetStatus
from draftgen.fold import fold_replicas, fold_reports, is_generation_done, progress_text, reported_tokens
from draftgen_contracts.states import DatasetState
from draftgen_dev.builders import SpecBuilder, dataset_progress, progress

SPEC = SpecBuilder().replicas(2).dataset("a", budget=1000).dataset("b", budget=500, sampleCap=3).spec()


def report(replica, **datasets):
    return progress(replica, replicas=2, **datasets)


def entry(tokens, samples=1, state=DatasetState.GENERATING, truncated=0, cut=0, cut_tokens=0):
    return dataset_progress(tokens, samples, state, truncated=truncated, cut=cut, cut_tokens=cut_tokens,
                            tokens_per_second=10.0)


def by_name(folded):
    return {d.name: d for d in folded}


def test_totals_are_summed_over_replicas_and_the_shared_budget_decides():
    reports = {0: report(0, a=entry(600, samples=5, truncated=2, cut=1, cut_tokens=100)),
               1: report(1, a=entry(450, samples=3, truncated=1, cut=1, cut_tokens=5))}
    folded = by_name(fold_reports(SPEC, reports, [], "t"))
    assert folded["a"].tokens == 1050 and folded["a"].state == DatasetState.BUDGET_MET
    assert (folded["a"].truncated, folded["a"].cut, folded["a"].cut_tokens) == (3, 2, 105)
    assert (folded["a"].cut_samples_percent, folded["a"].cut_tokens_percent) == (25.0, 10.0)
    assert folded["b"].state == DatasetState.PENDING and folded["b"].tokens is None  # no replica reported it


def test_before_any_report_no_dataset_claims_a_figure():
    """A run deleted and created again has its data on disk: a 0 before the first report would be a
    figure that falls (then rises again) across the re-creation."""
    folded = fold_reports(SPEC, {}, [], "t")
    assert [(d.tokens, d.samples, d.state) for d in folded] == [(None, None, DatasetState.PENDING)] * len(SPEC.datasets)
    assert reported_tokens(folded) is None and progress_text(folded) == "0.0%" and not is_generation_done(folded)
    reported = fold_reports(SPEC, {0: report(0, a=entry(0))}, [], "t")
    assert by_name(reported)["a"].tokens == 0 and reported_tokens(reported) == 0


def test_reports_of_replicas_the_spec_no_longer_has_are_ignored():
    folded = by_name(fold_reports(SPEC, {0: report(0, a=entry(100)), 5: report(5, a=entry(5000))}, [], "t"))
    assert folded["a"].tokens == 100


def test_exhausted_needs_every_replica_and_stays_until_the_budget_changes():
    one = {0: report(0, a=entry(10, state=DatasetState.EXHAUSTED))}
    assert by_name(fold_reports(SPEC, one, [], "t"))["a"].state == DatasetState.GENERATING
    both = {0: report(0, a=entry(10, state=DatasetState.EXHAUSTED)), 1: report(1, a=entry(10, state=DatasetState.EXHAUSTED))}
    folded = fold_reports(SPEC, both, [], "t")
    assert by_name(folded)["a"].state == DatasetState.EXHAUSTED
    assert by_name(fold_reports(SPEC, {}, folded, "t2"))["a"].state == DatasetState.EXHAUSTED  # the Jobs went away
    raised = SPEC.model_copy(deep=True)
    raised.datasets[0].budget_tokens = 2000
    assert by_name(fold_reports(raised, {}, folded, "t2"))["a"].state != DatasetState.EXHAUSTED


def test_sample_cap_counts_as_met_and_last_update_moves_only_on_change():
    reports = {0: report(0, b=entry(30, samples=2)), 1: report(1, b=entry(20, samples=1))}
    first = fold_reports(SPEC, reports, [], "t1")
    assert by_name(first)["b"].state == DatasetState.BUDGET_MET
    assert by_name(fold_reports(SPEC, reports, first, "t2"))["b"].last_update == "t1"


def test_done_and_progress():
    done = [DatasetStatus(name="a", budget_tokens=100, tokens=150, state=DatasetState.BUDGET_MET),
            DatasetStatus(name="b", budget_tokens=100, tokens=20, state=DatasetState.EXHAUSTED)]
    assert is_generation_done(done) and progress_text(done) == "100.0%"
    half = [DatasetStatus(name="a", budget_tokens=100, tokens=150, state=DatasetState.BUDGET_MET),
            DatasetStatus(name="b", budget_tokens=100, tokens=0, state=DatasetState.GENERATING)]
    assert not is_generation_done(half) and progress_text(half) == "50.0%"


def test_replicas_name_the_report_they_folded_and_their_part_of_each_dataset():
    reports = {1: report(1, a=dataset_progress(700, 3, settled=True, budget_tokens=1000)), 0: report(0, a=600, z=5)}
    folded = fold_replicas(SPEC, reports)
    assert [(r.index, r.report_time) for r in folded] == [(0, 100.0), (1, 101.0)]
    assert [(d.name, d.tokens, d.settled) for d in folded[0].datasets] == [("a", 600, False)]  # z is not in the spec
    [a] = folded[1].datasets
    assert (a.tokens, a.settled, a.budget_tokens, a.state) == (700, True, 1000, DatasetState.GENERATING)


def test_a_replica_not_reported_yet_counts_as_its_part_on_disk_never_as_zero():
    # Created again over the data of a deleted run: replica 0 reports first, and found replica 1's
    # part (2,844 tokens) on disk when it started.
    seen = dataset_progress(6088, 20, elsewhere={1: {"completion_tokens": 2844, "samples": 9, "cut": 1}})
    folded = by_name(fold_reports(SPEC, {0: report(0, a=seen)}, [], "t"))
    assert (folded["a"].tokens, folded["a"].samples, folded["a"].cut) == (8932, 29, 1)
    # Once replica 1 reports, its own report counts instead (it resumed past its summary).
    both = {0: report(0, a=seen), 1: report(1, a=entry(2900, samples=10))}
    assert by_name(fold_reports(SPEC, both, [], "t"))["a"].tokens == 8988
    # A view of a replica the spec no longer has counts for nothing.
    stale = dataset_progress(100, elsewhere={4: {"completion_tokens": 5000}})
    assert by_name(fold_reports(SPEC, {0: report(0, a=stale)}, [], "t"))["a"].tokens == 100
