"""Budget decisions (pure)."""

from draftgen_contracts import budget, exit_codes


def test_aborted_responses_never_count():
    assert budget.kept_tokens("stop", 10) == 10
    assert budget.kept_tokens("length", 7) == 7
    assert budget.kept_tokens("abort", 99) == 0


def test_budget_and_cap():
    assert not budget.is_budget_met(100, 99) and budget.is_budget_met(100, 100)
    assert not budget.is_sample_cap_reached(None, 10**9)
    assert budget.is_sample_cap_reached(5, 5) and not budget.is_sample_cap_reached(5, 4)


def test_should_dispatch_counts_in_flight_against_the_cap_only():
    assert budget.should_dispatch(100, 50, None, 3, in_flight=1000)
    assert not budget.should_dispatch(100, 100, None, 3, in_flight=0)
    assert budget.should_dispatch(100, 0, 5, 3, in_flight=1)
    assert not budget.should_dispatch(100, 0, 5, 3, in_flight=2)
    assert not budget.should_dispatch(100, 0, None, 0, in_flight=0, stopped=True)


def test_remaining_and_eta():
    assert budget.remaining_tokens(100, 130) == 0
    assert budget.eta_seconds(100, 40, 20.0) == 3.0
    assert budget.eta_seconds(100, 100, 0.0) == 0.0
    assert budget.eta_seconds(100, 40, 0.0) is None


def test_dataset_state():
    assert budget.dataset_state(100, 0) == "Pending"
    assert budget.dataset_state(100, 0, started=True) == "Generating"
    assert budget.dataset_state(100, 10) == "Generating"
    assert budget.dataset_state(100, 100, exhausted=True) == "BudgetMet"
    assert budget.dataset_state(100, 10, exhausted=True) == "Exhausted"
    assert budget.dataset_state(100, 10, 2, 2) == "BudgetMet"
    assert budget.dataset_state(100, 10, stopped=True) == "BudgetMet"
    assert budget.dataset_state(100, 100, failed=True) == "Failed"


def test_replica_sample_caps_add_up_to_the_cap():
    from jobrunner.generate import replica_sample_cap

    assert [replica_sample_cap(10, 3, k) for k in range(3)] == [4, 3, 3]
    assert replica_sample_cap(None, 3, 0) is None


def test_exit_code():
    from jobrunner.generate import exit_code

    assert exit_code({"a": "BudgetMet", "b": "Exhausted"}, 0, False, False) == exit_codes.OK
    assert exit_code({"a": "Generating"}, 3, False, False) == exit_codes.RETRY_LATER
    assert exit_code({"a": "BudgetMet"}, 3, False, False) == exit_codes.OK  # the failed rows are not needed
    assert exit_code({"a": "Generating"}, 0, True, False) == exit_codes.OK  # SIGTERM
    assert exit_code({"a": "Generating"}, 0, False, True) == exit_codes.FAILED


def test_in_flight_covers_budget_by_mean_length():
    covers = budget.in_flight_covers_budget
    # 100 tokens left; 10 responses of mean 20 tokens; no age information.
    assert covers(1000, 900, in_flight=5, in_flight_seconds=0.0, responses=10, response_tokens=200,
                  response_seconds=0.0)
    assert not covers(1000, 900, in_flight=4, in_flight_seconds=0.0, responses=10, response_tokens=200,
                      response_seconds=0.0)


def test_in_flight_covers_budget_by_what_the_long_ones_generated_already():
    covers = budget.in_flight_covers_budget
    # Mean 20 tokens at 10 tokens per request-second: 2 requests out 6 s in all made ~60 tokens.
    assert not covers(1000, 900, 2, 6.0, responses=10, response_tokens=200, response_seconds=20.0)
    assert covers(1000, 900, 2, 10.0, responses=10, response_tokens=200, response_seconds=20.0)


def test_in_flight_covers_budget_needs_an_estimate_and_requests_in_flight():
    covers = budget.in_flight_covers_budget
    few = budget.MIN_RESPONSES_FOR_ESTIMATE - 1
    assert not covers(1000, 900, 100, 100.0, responses=few, response_tokens=few * 50, response_seconds=1.0)
    assert not covers(1000, 999, 0, 0.0, responses=10, response_tokens=200, response_seconds=20.0)
    # Once they finish short, the remainder is no longer covered: dispatch resumes.
    assert not covers(1000, 930, 1, 0.5, responses=14, response_tokens=270, response_seconds=27.0)
