import json

import pytest

from draftgen_dev.builders import KIMI_K25_CONFIG as KIMI_K25
from jobrunner.preflight.model_facts import model_facts
from jobrunner.preflight.problem import PreflightProblem


def write(tmp_path, config):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_a_multimodal_wrapper_is_read_through_its_text_config(tmp_path):
    facts = model_facts(write(tmp_path, KIMI_K25))
    assert (facts.architecture, facts.hidden_size, facts.num_layers, facts.vocab_size, facts.context_length) == (
        "KimiK25ForConditionalGeneration", 7168, 61, 163840, 262144)
    assert facts.text_config_key == "text_config"


def test_a_plain_config_and_a_broken_one(tmp_path):
    facts = model_facts(write(tmp_path, {"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
                                         "num_hidden_layers": 8, "vocab_size": 512}))
    assert facts.hidden_size == 64 and facts.context_length is None and facts.text_config_key is None
    with pytest.raises(PreflightProblem, match="text_config.hidden_size missing"):
        model_facts(write(tmp_path, {"text_config": {"num_hidden_layers": 2, "vocab_size": 10}}))
    (tmp_path / "config.json").write_text("{")
    with pytest.raises(PreflightProblem, match="not readable as JSON"):
        model_facts(tmp_path)
