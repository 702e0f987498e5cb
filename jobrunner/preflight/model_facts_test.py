import json

import pytest

from jobrunner.preflight.model_facts import model_facts
from jobrunner.preflight.problem import PreflightProblem

# Shaped like moonshotai/Kimi-K2.5's config.json: a multimodal wrapper with the DeepSeek-V3-style
# text model nested under text_config (hidden size 7,168, 61 layers, vocabulary 163,840).
KIMI_K25 = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
            "vision_config": {"hidden_size": 1152},
            "text_config": {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168, "num_hidden_layers": 61,
                            "vocab_size": 163840, "max_position_embeddings": 262144}}


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
