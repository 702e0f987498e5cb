"""GenerateConfig: defaults, validation errors that name the field, YAML loading."""

import pytest

from jobrunner.shared.config import ConfigError, load_config, parse_config

BASE = {"server_url": "http://127.0.0.1:1", "output_root": "/tmp/x", "tokenizer_path": "/t",
        "datasets": [{"name": "a", "path": "a.jsonl", "budget_tokens": 10}]}


def with_dataset(**fields):
    return {**BASE, "datasets": [{**BASE["datasets"][0], **fields}]}


def test_defaults_match_the_reference_run():
    cfg = parse_config(BASE)
    assert [(c.name, c.concurrency, c.max_new_tokens) for c in cfg.prompt_classes] == [
        ("short", 150, 10_240), ("long", 32, 16_384)]
    assert cfg.context.policy == "clamp" and cfg.context.length is None
    assert str(cfg.coordination_directory()) == "/tmp/x/coordination"


@pytest.mark.parametrize("data, field", [
    (with_dataset(budget_tokens=0), "datasets[0].budget_tokens"),
    (with_dataset(sampling_params={"max_tokens": 5}), "datasets[0].sampling_params"),
    (with_dataset(sampling_params={"temperature": "0.7"}), "datasets[0].sampling_params"),
    (with_dataset(sampling_params={"max_new_tokens": 5}), "datasets[0].sampling_params"),
    (with_dataset(prompt_class="huge"), "prompt_class"),
    (with_dataset(name="a/b"), "datasets[0].name"),
    (with_dataset(extra_request_fields={"rid": "x"}), "datasets[0].extra_request_fields"),
    ({**BASE, "replica": 2, "replicas": 2}, "replica"),
    ({**BASE, "datasets": BASE["datasets"] * 2}, "duplicate"),
    ({**BASE, "tokenizer_path": None}, "tokenizer_path"),
    ({**BASE, "surprise": 1}, "surprise"),
])
def test_errors_name_the_field(data, field):
    with pytest.raises(ConfigError) as e:
        parse_config(data, "cfg.yaml")
    assert field in str(e.value) and "cfg.yaml" in str(e.value)


def test_pretokenized_datasets_need_no_tokenizer():
    parse_config({**BASE, "tokenizer_path": None, "datasets": [{**BASE["datasets"][0], "pretokenized": True}]})


def test_load_yaml(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("server_url: http://127.0.0.1:1\noutput_root: /o\ntokenizer_path: /t\n"
                    "datasets:\n  - {name: a, path: a.jsonl, budget_tokens: 5, sampling_params: {temperature: 0.6}}\n")
    assert load_config(path).datasets[0].sampling_params == {"temperature": 0.6}
    (tmp_path / "bad.yaml").write_text("datasets: [")
    with pytest.raises(ConfigError, match="bad.yaml"):
        load_config(tmp_path / "bad.yaml")
