"""Budget decisions (pure)."""

from jobrunner import budget


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
    from jobrunner.generate import EXIT_FAILED, EXIT_OK, EXIT_RETRY_LATER, exit_code

    assert exit_code({"a": "BudgetMet", "b": "Exhausted"}, 0, False, False) == EXIT_OK
    assert exit_code({"a": "Generating"}, 3, False, False) == EXIT_RETRY_LATER
    assert exit_code({"a": "BudgetMet"}, 3, False, False) == EXIT_OK  # the failed rows are not needed
    assert exit_code({"a": "Generating"}, 0, True, False) == EXIT_OK  # SIGTERM
    assert exit_code({"a": "Generating"}, 0, False, True) == EXIT_FAILED
