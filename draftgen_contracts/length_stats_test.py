from collections import Counter

import pytest

from draftgen_contracts.length_stats import length_counts, length_stats


@pytest.mark.parametrize("counts, expected", [
    (Counter({10: 50, 2000: 40, 6000: 10}),
     dict(count=100, median=10, p90=2000, p99=6000, max=6000, share_over_1k=0.5, share_over_5k=0.1, mean=1405.0)),
    (length_counts([100, 2000, 6000, 300]),
     dict(count=4, min=100, median=300, p90=6000, max=6000, share_over_1k=0.5, share_over_5k=0.25, sum=8400)),
    (Counter(), dict(count=0, median=0, max=0)),
    (Counter({7: 1}), dict(count=1, min=7, median=7, p99=7, max=7)),
])
def test_nearest_rank_quantiles_are_lengths_that_occurred(counts, expected):
    stats = length_stats(counts).to_json()
    assert {k: stats[k] for k in expected} == expected


def test_the_report_and_the_manifest_read_one_definition():
    from jobrunner.stats import dataset_stats as stats
    from jobrunner.merge import tally

    assert tally.length_stats is stats.length_stats is length_stats
