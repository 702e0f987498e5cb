"""The lax coercions SGLang's HTTP layer applies before its stricter request schema."""

import pytest

from draftgen_simulator.http_layer import http_layer_problem


@pytest.mark.parametrize("body", [
    {"rid": 7}, {"rid": [1, 2]}, {"text": 5}, {"routing_key": 5}, {"stream": "maybe"}, {"stream": 2},
    {"priority": 1.5}, {"priority": "abc"}, {"custom_labels": {"a": 1}}, {"sampling_params": "x"},
])
def test_what_lax_validation_cannot_coerce_is_refused_here(body):
    assert next(iter(body)) in http_layer_problem({"input_ids": [1], **body})


@pytest.mark.parametrize("body", [
    {"stream": "true"}, {"stream": 1}, {"return_logprob": "yes"}, {"priority": "3"}, {"priority": 3.0},
    {"rid": "r"}, {"rid": ["a", "b"]}, {"sampling_params": [{}, {}]}, {"unknown": object()},
])
def test_what_it_coerces_is_left_to_the_schema(body):
    assert http_layer_problem({"input_ids": [1], **body}) is None
