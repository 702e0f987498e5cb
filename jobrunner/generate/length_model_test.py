import random

import pytest

from jobrunner.generate.length_model import LengthModel


def test_with_nothing_seen_a_request_is_expected_halfway_to_its_cap():
    model = LengthModel(cap=10_240)
    assert model.expected_response() == pytest.approx(5_120, rel=0.02)
    assert model.expected_finals([5000.0]) == [pytest.approx(7_620, rel=0.02)]


def test_completed_lengths_alone_give_their_mean():
    model = LengthModel(cap=12_800)
    for n in [1000] * 50 + [3000] * 50:
        model.add(n)
    assert model.expected_response() == pytest.approx(2000, rel=0.05)
    # A request past 1,000 tokens is one of the long ones.
    assert model.expected_finals([1500.0]) == [pytest.approx(3000, rel=0.05)]


def test_requests_in_flight_correct_the_bias_of_the_short_ones_finishing_first():
    rng = random.Random(1)
    lengths = [min(10_240, round(rng.lognormvariate(7.5, 0.9))) for _ in range(4000)]
    # Halfway through a wave sent at once at 100 tokens/s: what finished, and what is still out.
    t = 20.0
    completed = [n for n in lengths if n <= 100 * t]
    still_out = [n for n in lengths if n > 100 * t]
    model = LengthModel(cap=10_240)
    for n in completed:
        model.add(n)
    truth = sum(still_out)
    # The mean of what finished says the requests out will bring far less than they will...
    assert len(still_out) * sum(completed) / len(completed) < 0.5 * truth
    # ... the censored estimate errs long: every one is known to pass 2,000, nothing is known beyond.
    expected = sum(model.expected_finals([100 * t] * len(still_out)))
    assert truth <= expected <= 1.5 * truth


def test_once_long_responses_completed_the_estimate_follows_them():
    rng = random.Random(2)
    model = LengthModel(cap=10_240)
    lengths = [min(10_240, round(rng.lognormvariate(7.5, 0.9))) for _ in range(4000)]
    for n in lengths:
        model.add(n)
    true_mean = sum(lengths) / len(lengths)
    assert model.expected_response() == pytest.approx(true_mean, rel=0.03)
    long = [n for n in lengths if n > 2000]
    assert model.expected_finals([2000.0])[0] == pytest.approx(sum(long) / len(long), rel=0.03)


def test_expected_final_is_never_below_what_a_request_has_generated():
    model = LengthModel(cap=1000)
    for _ in range(20):
        model.add(100)
    assert model.expected_finals([990.0])[0] >= 990.0


def test_the_spread_of_a_final_length_follows_the_completed_ones():
    model = LengthModel(cap=12_800)
    for n in [1000] * 50 + [3000] * 50:
        model.add(n)
    moments = model.moments([])
    assert moments.variance[0] ** 0.5 == pytest.approx(1000, rel=0.1)
    # Past 1,000 tokens only the 3,000s are left: nearly no spread.
    mean, variance = moments.final(1500.0)
    assert mean == pytest.approx(3000, rel=0.05) and variance ** 0.5 < 150
