import pytest

from jobrunner.generate.decode_clock import DecodeClock


def test_one_response_sets_the_rate_it_ran_at():
    clock = DecodeClock(0.0, bin_s=0.5)
    clock.observe(0.0, 4.0, 400)
    assert clock.rate() == pytest.approx(100.0)
    assert clock.generated(1.0, 3.0) == pytest.approx(200.0)
    assert clock.generated(3.0, 6.0) == pytest.approx(300.0)  # past the last response: the latest rate


def test_the_rate_falls_where_the_responses_say_the_batch_grew():
    # 100 tokens/s for 10 s, then 50: short responses at each speed tell the two apart.
    clock = DecodeClock(0.0, bin_s=0.5)
    truth = lambda s, e: 100 * (min(e, 10) - min(s, 10)) + 50 * (max(e, 10) - max(s, 10))  # noqa: E731
    for _ in range(30):
        for s in range(0, 19):
            clock.observe(float(s), s + 1.0, round(truth(s, s + 1.0)))
    # A request sent at 5 s, still running at 18 s: 500 + 400 tokens.
    assert clock.generated(5.0, 18.0) == pytest.approx(truth(5, 18), rel=0.02)
    assert clock.rate() == pytest.approx(50.0, rel=0.02)


def test_a_long_response_corrects_the_bins_it_spans_and_keeps_the_short_ones_true():
    clock = DecodeClock(0.0, bin_s=1.0)
    for s in range(10):
        clock.observe(float(s), s + 1.0, 100)
    clock.observe(0.0, 10.0, 1000)  # agrees with them: nothing moves
    assert clock.generated(0.0, 10.0) == pytest.approx(1000.0)
    assert clock.generated(2.0, 3.0) == pytest.approx(100.0)


def test_forgotten_bins_still_count_in_what_later_requests_made():
    clock = DecodeClock(0.0, bin_s=1.0)
    for s in range(10):
        clock.observe(float(s), s + 1.0, 100)
    before = clock.generated(6.0, 9.5)
    clock.forget_before(6.0)
    assert len(clock.rates) == 4 and clock.generated(6.0, 9.5) == pytest.approx(before)
    clock.observe(9.0, 12.0, 300)
    assert clock.generated(6.0, 12.0) == pytest.approx(600.0)
