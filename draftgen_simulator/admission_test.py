"""What the simulator admits and refuses before anything is scheduled, and in which error shape."""

from __future__ import annotations

import itertools

import pytest

from draftgen_simulator.admission import Admitted, Refusal, admit
from draftgen_simulator.config import SimConfig

CONFIG = SimConfig(profile="fixed:10", context_len=100)


def run(body, live=()):
    counter = itertools.count()
    return admit(body, CONFIG, set(live), lambda: f"auto-{next(counter)}", lambda text: [5] * len(text))


def test_a_single_prompt_is_planned_from_its_profile():
    admitted = run({"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 50}, "rid": "r"})
    assert isinstance(admitted, Admitted) and not admitted.is_batch
    [item] = admitted.items
    assert (item.rid, item.tokens, item.finish["type"]) == ("r", 10, "stop")


def test_a_batch_gets_a_rid_each():
    admitted = run({"input_ids": [[1], [2]], "sampling_params": {"max_new_tokens": 5}})
    assert [i.rid for i in admitted.items] == ["auto-0", "auto-1"] and admitted.is_batch


@pytest.mark.parametrize("body, shape, fragment", [
    ({"input_ids": [1], "sampling_params": {"max_tokens": 4}}, "schema", "unknown field `max_tokens`"),
    ({"input_ids": [1], "sampling_params": {"temperature": "0.7"}}, "schema", "invalid type"),
    ({"input_ids": [1], "stream": "true"}, "schema", "stream"),
    ({"input_ids": [1], "sampling_params": {"top_p": 0}}, "value", "top_p"),
    ({"sampling_params": {}}, "value", "Either text, input_ids"),
    ({"input_ids": []}, "value", "must not be empty"),
    ({"input_ids": list(range(100))}, "value", "longer than the model's context length"),
    ({"input_ids": [1] * 60, "sampling_params": {"max_new_tokens": 41}}, "value", "exceeds the model's maximum"),
    ({"input_ids": [1], "rid": "taken", "sampling_params": {"max_new_tokens": 4}}, "value", "Duplicate request ID"),
])
def test_refusals_come_in_sglangs_shape(body, shape, fragment):
    refusal = run(body, live={"taken"})
    assert isinstance(refusal, Refusal) and refusal.status == 400
    message = refusal.body["error"] if shape == "schema" else refusal.body["error"]["message"]
    assert isinstance(message, str) and fragment in message


def test_a_prompt_that_exactly_fills_the_context_is_admitted_and_capped_by_the_scheduler():
    # 0.5.23 refuses prompt + max_new_tokens > context; the scheduler then caps the request two
    # tokens short of the context (docs/sglang.md#context-length)
    admitted = run({"input_ids": [1] * 60, "sampling_params": {"max_new_tokens": 40, "ignore_eos": True}})
    assert admitted.items[0].tokens == 38 and admitted.items[0].finish == {"type": "length", "length": 38}
