"""A model that ships its tokenizer and config as Python (built like Kimi-K2.5's, draftgen_dev.kimi_like):
the preflight refuses it without spec.model.trustRemoteCode, naming the field and the file that asked,
and with it loads the custom tokenizer, whose ids are what generation stores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from draftgen_dev.builders import generate_config
from draftgen_dev.demo_assets import write_datasets
from draftgen_dev.kimi_like import RESERVED, VOCAB_SIZE, build_kimi_like, special_token_ids
from jobrunner.shared.prompts import load_tokenizer, render_conversation
from jobrunner.shared.datasets import Conversation
from jobrunner.preflight.run import end_token_ids, run_preflight
from jobrunner.hidden_states.transformers_backend import TransformersBackend


@pytest.fixture(scope="module")
def kimi_like(tmp_path_factory):
    return build_kimi_like(tmp_path_factory.mktemp("models") / "kimi-like")


@pytest.fixture(scope="module")
def prompts(tmp_path_factory):
    return write_datasets(tmp_path_factory.mktemp("prompts"), rows_per_dataset=40)


def findings_for(tmp_path, model, prompts, trust: bool):
    datasets = [{"name": name, "path": str(path), "budget_tokens": 2000} for name, path in prompts.items()]
    config = generate_config("http://127.0.0.1:1", tmp_path / "out", model, datasets, trust_remote_code=trust,
                             prompt_classes=[{"name": "all", "concurrency": 4, "max_new_tokens": 200}])
    return run_preflight(config, model)


def test_without_trust_the_preflight_names_the_field_and_the_file_that_asked(tmp_path, kimi_like, prompts):
    problem = findings_for(tmp_path, kimi_like, prompts, trust=False).problem
    assert problem is not None
    assert problem.where == f"{kimi_like}/config.json"
    assert "spec.model.trustRemoteCode" in problem.message and "configuration_kimi.KimiLikeConfig" in problem.message


def test_a_custom_tokenizer_alone_is_named_by_its_tokenizer_config(tmp_path, kimi_like, prompts):
    # A plain model config beside the custom tokenizer: the tokenizer's file is the one that asks.
    model = tmp_path / "plain-config"
    model.mkdir()
    for f in ("tokenization_kimi.py", "tiktoken.model", "tokenizer_config.json"):
        (model / f).write_bytes((Path(kimi_like) / f).read_bytes())
    config = json.loads((Path(kimi_like) / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(config["text_config"]))
    problem = findings_for(tmp_path, str(model), prompts, trust=False).problem
    assert problem is not None and problem.where == f"{model}/tokenizer_config.json"
    assert "AutoTokenizer: tokenization_kimi.TikTokenTokenizer" in problem.message


def test_with_trust_the_custom_tokenizer_scans_every_dataset(tmp_path, kimi_like, prompts):
    findings = findings_for(tmp_path, kimi_like, prompts, trust=True)
    assert findings.problem is None, findings.problem
    assert findings.model.text_config_key == "text_config" and findings.model.vocab_size == VOCAB_SIZE
    assert findings.tokenizer.vocab_size == VOCAB_SIZE and findings.tokenizer.eos_token == "[EOS]"
    assert all(d.usable_rows > 0 for d in findings.datasets)
    # The turn's end token comes from generation_config.json, beside the tokenizer's [EOS].
    assert end_token_ids(load_tokenizer(kimi_like, True), kimi_like) == {
        special_token_ids()["<|im_end|>"], special_token_ids()["[EOS]"]}


def test_the_custom_template_sorts_tools_and_opens_an_empty_think_block_without_thinking(kimi_like):
    tokenizer = load_tokenizer(kimi_like, trust_remote_code=True)
    tools = [{"type": "function", "function": {"parameters": {"type": "object"}, "name": "get_weather"}}]
    row = Conversation(0, [{"role": "user", "content": "What is the weather in Paris? 你好"}], tools)
    ids = render_conversation(tokenizer, row, {"thinking": False})
    text = tokenizer.decode(ids)
    assert text.index('"function"') < text.index('"type"')  # keys sorted by the tokenizer's own override
    assert text.endswith("<|im_assistant|>assistant<|im_middle|><think></think>")
    assert "你好" in text and all(i < VOCAB_SIZE for i in ids)
    assert render_conversation(tokenizer, row, {"thinking": True})[-1] == special_token_ids()["<|im_middle|>"]
    assert len(tokenizer) == VOCAB_SIZE and VOCAB_SIZE - RESERVED == len(tokenizer.model._mergeable_ranks)


def test_the_transformers_backend_finds_the_wrapped_decoder_with_trust(kimi_like):
    with pytest.raises(ValueError, match="trust_remote_code"):
        TransformersBackend(kimi_like, None, dtype="fp32")
    backend = TransformersBackend(kimi_like, None, dtype="fp32", trust_remote_code=True)
    [states] = backend.extract([[1, 2, 3, 4, 5]])
    assert (backend.num_layers, backend.hidden_size) == (8, 64)
    assert tuple(states.aux.shape) == (5, 3, 64) and tuple(states.final.shape) == (5, 64)
