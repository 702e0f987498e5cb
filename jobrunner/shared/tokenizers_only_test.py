"""transformers without torch gives the same tokenizers and the same ids, remote code included, and
a tokenizer whose own code imports torch still loads. The torch-free side runs in a process of its
own (hiding torch is for the whole process); the worker's own loading is the reference."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from draftgen_dev.kimi_like import build_kimi_like_without_weights
from draftgen_dev.tiny_model import build_tiny_tokenizer
from jobrunner import cli
from jobrunner.shared import tokenizers_only
from jobrunner.shared.datasets import Conversation
from jobrunner.shared.prompts import load_tokenizer, render_conversation

CONVERSATION = Conversation(0, [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the weather in Paris today?"},
    {"role": "assistant", "content": "",
     "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "sunny and warm"},
], tools=[{"type": "function", "function": {"name": "get_weather", "description": "the weather in a city",
                                             "parameters": {"type": "object",
                                                            "properties": {"city": {"type": "string"}}}}}])

PROBE = """
import json, sys
from jobrunner.shared import tokenizers_only
hidden = tokenizers_only.hide_torch()
from jobrunner.shared.datasets import Conversation
from jobrunner.shared.prompts import load_tokenizer, render_conversation
conversation = Conversation(**json.loads(sys.argv[1]))
loaded = []
for folder in sys.argv[2:]:
    tokenizer = load_tokenizer(folder, trust_remote_code=True)
    loaded.append({"class": type(tokenizer).__name__, "ids": render_conversation(tokenizer, conversation, {}),
                   "torch": sys.modules.get("torch") is not None})
print(json.dumps({"hidden": hidden, "loaded": loaded}))
"""


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokenizers")
    kimi = build_kimi_like_without_weights(root / "kimi-like")
    asks_for_torch = Path(build_kimi_like_without_weights(root / "asks-for-torch"))
    code = asks_for_torch / "tokenization_kimi.py"
    code.write_text("import torch  # a tokenizer of its own that wants torch\n" + code.read_text())
    return [build_tiny_tokenizer(root / "tiny"), kimi, str(asks_for_torch)]


def test_without_torch_the_same_classes_and_ids_and_a_tokenizer_that_imports_torch_still_loads(folders):
    conversation = json.dumps({"row": 0, "messages": CONVERSATION.messages, "tools": CONVERSATION.tools})
    done = subprocess.run([sys.executable, "-c", PROBE, conversation, *folders], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert tokenizers_only.NO_TORCH_NOTICE not in done.stderr
    probe = json.loads(done.stdout)
    assert probe["hidden"] is True
    for folder, loaded in zip(folders, probe["loaded"]):
        reference = load_tokenizer(folder, trust_remote_code=True)
        assert loaded["class"] == type(reference).__name__, folder
        assert loaded["ids"] == render_conversation(reference, CONVERSATION, {}), folder
    tiny, kimi, asks_for_torch = probe["loaded"]
    assert not tiny["torch"] and not kimi["torch"], "torch was imported for a tokenizer that does not need it"
    assert asks_for_torch["torch"], "the tokenizer that imports torch got it"


def test_torch_is_hidden_only_in_a_jobrunner_process_of_its_own(monkeypatch):
    calls = []
    monkeypatch.setattr(tokenizers_only, "hide_torch", lambda: calls.append(True))
    monkeypatch.setattr(cli, "dispatch", lambda *args: 0)
    monkeypatch.setattr(sys, "argv", ["jobrunner", "merge"])
    cli.main()
    assert calls == []
    monkeypatch.setattr(sys, "argv", ["jobrunner", "generate"])
    cli.main(["generate"])  # called from a process that may need torch afterwards
    assert calls == []
    cli.main()
    assert calls == [True]


def test_hiding_is_refused_once_torch_or_transformers_is_loaded():
    import importlib

    importlib.import_module("transformers")  # as in a process that has tokenized already
    assert tokenizers_only.hide_torch() is False and not tokenizers_only.torch_hidden()
