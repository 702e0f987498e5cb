"""The generate config: what a writer builds, a reader parses back the same; each rule is refused
with a message naming the field."""

import json

import pytest
from pydantic import ValidationError

from draftgen_contracts.generate_config import STARTUP_TIMEOUT_S, CoordinationConfig, DatasetConfig, GenerateConfig
from draftgen_contracts.prompt_classes import DEFAULT_PROMPT_CLASSES, PromptClass
from draftgen_contracts.validation import error_lines

BASE = {"server_url": "http://127.0.0.1:1", "output_root": "/o", "tokenizer_path": "/t",
        "datasets": [{"name": "a", "path": "a.jsonl", "budget_tokens": 10}]}


def test_what_a_writer_builds_parses_back_the_same():
    built = GenerateConfig(
        server_url="http://pod:30000", output_root="/data/run", tokenizer_path="/models/m", replica=1, replicas=2,
        prompt_classes=[PromptClass(name="short", max_prompt_tokens=512, concurrency=8, max_new_tokens=100), PromptClass(name="long", max_prompt_tokens=None, concurrency=2, max_new_tokens=300)],
        datasets=[DatasetConfig(name="fc", path="/data/fc.jsonl", budget_tokens=1000, prompt_class="long",
                                sampling_params={"temperature": 0.6})],
        coordination=CoordinationConfig(kind="kubernetes", name="run", namespace="ml"))
    document = json.loads(json.dumps(built.to_document()))
    assert document["prompt_classes"][0] == {"name": "short", "max_prompt_tokens": 512, "concurrency": 8,
                                             "max_new_tokens": 100}  # the config's own spelling
    assert GenerateConfig.model_validate(document) == built


def test_with_paths_moves_every_path_the_config_names_and_nothing_else():
    config = GenerateConfig.model_validate({**BASE, "coordination": {"kind": "file", "directory": "/o/c"}})
    moved = config.with_paths(lambda p: "/here" + p)
    assert (moved.output_root, moved.tokenizer_path, moved.datasets[0].path, moved.coordination.directory) == (
        "/here/o", "/here/t", "/herea.jsonl", "/here/o/c")
    assert moved.model_copy(update={"output_root": "/o", "tokenizer_path": "/t", "datasets": config.datasets,
                                    "coordination": config.coordination}) == config
    default = GenerateConfig.model_validate(BASE).with_paths(lambda p: "/here" + p)
    assert default.coordination.directory is None and str(default.coordination_directory()) == "/here/o/coordination"


def test_defaults_are_the_reference_run_and_the_specs():
    config = GenerateConfig.model_validate(BASE)
    assert tuple(config.prompt_classes) == DEFAULT_PROMPT_CLASSES
    assert config.startup_timeout_s == STARTUP_TIMEOUT_S


def refusal(**changes) -> str:
    with pytest.raises(ValidationError) as e:
        GenerateConfig.model_validate({**BASE, **changes})
    return "\n".join(error_lines(e.value, "config"))


def with_dataset(**fields) -> dict:
    return {"datasets": [{**BASE["datasets"][0], **fields}]}


@pytest.mark.parametrize("changes, says", [
    (with_dataset(name="Glaive_FC"), "config.datasets[0].name: String should match pattern"),
    (with_dataset(name="a" * 41), "config.datasets[0].name: String should match pattern"),
    ({"startup_timeout_s": 0}, "config.startup_timeout_s: Input should be greater than 0"),
    ({"prompt_classes": [{"name": "short", "max_prompt_tokens": 9, "concurrency": 1, "max_new_tokens": 1}]},
     "prompt_classes: exactly one class must have no max_prompt_tokens"),
    ({"prompt_classes": [{"name": "all", "concurrency": 5000, "max_new_tokens": 1}]},
     "config.prompt_classes[0].concurrency: Input should be less than or equal to 4096"),
    ({"prompt_classes": [{"name": "all", "concurrency": 1, "max_new_tokens": 1, "max_tokens": 1}]},
     "config.prompt_classes[0].max_tokens: Extra inputs are not permitted"),
    (with_dataset(prompt_class="huge"), "datasets[0].prompt_class: 'huge' is not one of ['short', 'long']"),
])
def test_each_rule_is_refused_naming_the_field(changes, says):
    assert says in refusal(**changes)


def test_fields_name_columns_of_other_names_and_old_configs_parse_without_them():
    assert GenerateConfig.model_validate(BASE).datasets[0].fields is None
    fields = {"prompt": "problem", "system": "instruction", "id": "uuid"}
    d = DatasetConfig.model_validate({"name": "m", "path": "data/", "budget_tokens": 1, "fields": fields})
    assert (d.fields.prompt, d.fields.system, d.fields.id, d.fields.messages) == ("problem", "instruction", "uuid", None)
    assert DatasetConfig.model_validate({**BASE["datasets"][0], "format": "json"}).format == "json"
    refused = {
        "name at least one": {},
        "name one of them": {"prompt": "q", "messages": "c"},
        "a column of its own": {"prompt": "q", "id": "q"},
        "Extra inputs are not permitted": {"question": "q"},
    }
    for message, wrong in refused.items():
        with pytest.raises(ValidationError, match=message):
            DatasetConfig.model_validate({**BASE["datasets"][0], "fields": wrong})
    with pytest.raises(ValidationError, match="only id applies"):
        DatasetConfig.model_validate({**BASE["datasets"][0], "pretokenized": True, "fields": {"prompt": "q"}})
    with pytest.raises(ValidationError, match="prompt and system do not apply"):
        DatasetConfig.model_validate({**BASE["datasets"][0], "kind": "traces", "fields": {"system": "s"}})
    traces = DatasetConfig.model_validate({**BASE["datasets"][0], "kind": "traces", "fields": {"messages": "chat"}})
    assert traces.fields.messages == "chat"
