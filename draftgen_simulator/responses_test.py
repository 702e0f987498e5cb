from draftgen_simulator.config import FaultRates
from draftgen_simulator.responses import (
    choose_fault,
    per_request_rate,
    plan_response,
    prefix_matches,
    response_token_ids,
)


def test_choose_fault_stacks_the_rates():
    rates = FaultRates(http_500=0.1, http_503=0.2, reset=0.1, timeout=0.0, slow=0.1)
    assert choose_fault(rates, 0.05) == "http_500"
    assert choose_fault(rates, 0.15) == "http_503"
    assert choose_fault(rates, 0.35) == "reset"
    assert choose_fault(rates, 0.45) == "slow"
    assert choose_fault(rates, 0.55) is None
    assert choose_fault(FaultRates(timeout=1.0), 0.999) == "timeout"
    assert choose_fault(FaultRates(), 0.0) is None


def test_capacity_is_shared_only_when_it_binds():
    assert per_request_rate(100, 1000, 5) == 100
    assert per_request_rate(100, 1000, 20) == 50
    assert per_request_rate(100, 1000, 0) == 0


def test_plan_response_stops_at_eos_or_at_the_limit():
    assert plan_response(10, 100, 1000, False, 2) == (10, {"type": "stop", "matched": 2})
    assert plan_response(500, 100, 1000, False, 2) == (100, {"type": "length", "length": 100})
    assert plan_response(10, 100, 1000, True, 2) == (100, {"type": "length", "length": 100})
    # max_new_tokens None: up to the context
    assert plan_response(5000, None, 300, False, 2) == (300, {"type": "length", "length": 300})


def test_token_ids_end_with_eos_only_on_a_stop():
    ids = response_token_ids(12345, 500, 32000, 7, True)
    assert ids[-1] == 7 and 7 not in ids[:-1] and all(3 <= t < 32000 for t in ids[:-1])
    assert 7 not in response_token_ids(12345, 500, 32000, 7, False)
    assert response_token_ids(1, 0, 32000, 2, True) == []


def test_prefix_matching_is_sglangs():
    assert prefix_matches("job10", "job1") and prefix_matches("job1", "job1")
    assert not prefix_matches("job1", "job10")
