import statistics

import pytest

from draftgen_simulator.config import SimConfig
from draftgen_simulator.profiles import get_profile, seeded_rng


def test_function_calling_profile_matches_the_motivating_run():
    profile = get_profile("function_calling")
    rng = seeded_rng(0, "test")
    draws = [profile.sample(rng) for _ in range(20000)]
    assert 430 < statistics.median(draws) < 520
    assert 1100 < statistics.fmean(draws) < 1550
    over_1k = sum(d > 1000 for d in draws) / len(draws)
    over_5k = sum(d > 5000 for d in draws) / len(draws)
    assert 0.25 < over_1k < 0.40 and 0.03 < over_5k < 0.07


def test_profiles_order_by_length_and_fixed_is_exact():
    assert get_profile("chat").mean < get_profile("code").mean < get_profile("math").mean
    assert 3300 < get_profile("code").mean < 4300
    assert get_profile("fixed:17").sample(seeded_rng(0)) == 17


@pytest.mark.parametrize("name", ["nope", "fixed:0", "fixed:x"])
def test_bad_profile_names_are_refused(name):
    with pytest.raises(ValueError):
        get_profile(name)
    with pytest.raises(ValueError):
        SimConfig(profile=name)


def test_seeded_rng_depends_on_seed_and_parts_only():
    assert seeded_rng(1, "a", 2).random() == seeded_rng(1, "a", 2).random()
    assert seeded_rng(1, "a", 2).random() != seeded_rng(2, "a", 2).random()
