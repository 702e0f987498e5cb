"""The budget decisions, as tables."""

import pytest

from draftgen_contracts import budget
from draftgen_contracts.states import DatasetState


@pytest.mark.parametrize("finish_reason, completion, kept", [("stop", 10, 10), ("length", 7, 7), ("abort", 99, 0)])
def test_aborted_responses_never_count(finish_reason, completion, kept):
    assert budget.kept_tokens(finish_reason, completion) == kept


@pytest.mark.parametrize("budget_tokens, tokens, cap, samples, met, capped", [
    (100, 99, None, 10**9, False, False),
    (100, 100, None, 0, True, False),
    (100, 0, 5, 5, False, True),
    (100, 0, 5, 4, False, False),
])
def test_budget_and_cap(budget_tokens, tokens, cap, samples, met, capped):
    assert budget.is_budget_met(budget_tokens, tokens) == met
    assert budget.is_sample_cap_reached(cap, samples) == capped


@pytest.mark.parametrize("tokens, cap, samples, in_flight, stopped, dispatch", [
    (50, None, 3, 1000, False, True),  # without a cap, requests in flight do not count
    (100, None, 3, 0, False, False),  # met
    (0, 5, 3, 1, False, True),
    (0, 5, 3, 2, False, False),  # in flight count against the cap: never past it
    (0, None, 0, 0, True, False),  # stopped by the coordinator
])
def test_should_dispatch(tokens, cap, samples, in_flight, stopped, dispatch):
    assert budget.should_dispatch(100, tokens, cap, samples, in_flight=in_flight, stopped=stopped) == dispatch


@pytest.mark.parametrize("tokens, rate, remaining, eta", [(130, 0.0, 0, 0.0), (40, 20.0, 60, 3.0),
                                                         (100, 0.0, 0, 0.0), (40, 0.0, 60, None)])
def test_remaining_and_eta(tokens, rate, remaining, eta):
    assert budget.remaining_tokens(100, tokens) == remaining
    assert budget.eta_seconds(100, tokens, rate) == eta


@pytest.mark.parametrize("args, flags, state", [
    ((100, 0), {}, DatasetState.PENDING),
    ((100, 0), {"started": True}, DatasetState.GENERATING),
    ((100, 10), {}, DatasetState.GENERATING),
    ((100, 100), {"exhausted": True}, DatasetState.BUDGET_MET),  # met with its last rows: met
    ((100, 10), {"exhausted": True}, DatasetState.EXHAUSTED),
    ((100, 10, 2, 2), {}, DatasetState.BUDGET_MET),  # the sample cap reached
    ((100, 10), {"stopped": True}, DatasetState.BUDGET_MET),
    ((100, 100), {"failed": True}, DatasetState.FAILED),
])
def test_dataset_state(args, flags, state):
    assert budget.dataset_state(*args, **flags) == state


ESTIMATE = {"responses": 10, "response_tokens": 200}  # a mean of 20 tokens per response