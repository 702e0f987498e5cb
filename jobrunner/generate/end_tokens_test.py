import json

from jobrunner.generate.end_tokens import ends_complete, model_end_ids, request_end_ids


class Tokenizer:
    eos_token_id = 7


def test_the_model_ends_at_the_ids_of_both_configs_and_its_tokenizer(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": 2, "text_config": {"eos_token_id": [3]}}))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 4]}))
    assert model_end_ids(tmp_path, Tokenizer()) == {2, 3, 4, 7}


def test_missing_or_unreadable_configs_say_nothing(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    assert model_end_ids(tmp_path, None) == frozenset()
    assert model_end_ids(None, Tokenizer()) == {7}


def test_a_request_adds_its_stop_token_ids_and_ignore_eos_ends_at_none():
    assert request_end_ids({"stop_token_ids": [9]}, {2}) == {2, 9}
    assert request_end_ids({"ignore_eos": True, "stop_token_ids": [9]}, {2}) == frozenset()


def test_a_response_is_complete_when_its_last_id_ends_it():
    assert ends_complete([5, 2], frozenset({2})) and not ends_complete([2, 5], frozenset({2}))
    assert not ends_complete([], frozenset({2}))
