"""The whole pipeline with a model built like Kimi-K2.5 (draftgen_dev.kimi_like: a tiktoken tokenizer
and a config that are the folder's own Python, the language model under text_config) on the real
SGLang 0.5.23 started with --trust-remote-code: `draftgen run QUICKSTART --server-url URL`, as
docs/local-run.md tells a user with a server of their own, with spec.model.trustRemoteCode
(preflight, generation, merge, transformers extraction; every budget exact with `atBudget: cut`, the
server's version in the provenance), then the SGLang extraction backend over the same corpus, and
`jobrunner validate`. The stored prompt ids are the custom tokenizer's own
apply_chat_template, the responses the server's output_ids."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import numpy as np

from draftgen_operator import cli
from draftgen_dev.demo_assets import write_datasets
from draftgen_dev.kimi_like import RECOMMENDED_SAMPLING, VOCAB_SIZE, special_token_ids
from draftgen_dev.real_sglang.install import SGLANG_VERSION as REAL_SGLANG_VERSION
from jobrunner.shared.corpus import iter_corpus
from jobrunner.shared.datasets import read_rows
from jobrunner.hidden_states.store import INDEX_NAME, load_sample
from jobrunner.shared.output import iter_records, read_summary, record_files
from jobrunner.shared.prompts import load_tokenizer, render_conversation
from tests.local_run.conftest import quickstart, write_spec
from tests.real_sglang.test_sglang_extraction import sglang_extract

BUDGET = 300
DRAFT_VOCAB = 64  # below the model's vocabulary, so the merge writes the d2t/t2d maps
# bf16 states of one model from two backends differ by the rounding of each layer's bf16 arithmetic
# (a few units in the last place: 0.0625 at magnitude 2 seen); held as the norm of the difference
# over the norm of the states (the float32 equality is tests/real_sglang/test_sglang_extraction.py's).
BF16_RELATIVE = 0.02


def test_sglang_applies_the_models_recommended_sampling_to_its_openai_routes_but_not_to_generate(kimi_like,
                                                                                                  kimi_server):
    """What draftgen's default rests on (jobrunner/shared/recommended_sampling.py): the model's
    generation_config.json says top_k 1, so a request that got it answers greedily, the same every time.
    The server runs with SGLang 0.5.23's default --sampling-defaults model. A one-off run with
    --sampling-defaults openai answered neither route greedily (docs/sglang.md#sampling-defaults)."""
    tokenizer = load_tokenizer(kimi_like / "kimi-like", trust_remote_code=True)
    row = next(r for r in read_rows(write_datasets(kimi_like.parent / "probe", 5)["chat"]) if hasattr(r, "messages"))
    ids = render_conversation(tokenizer, row, {"thinking": False})

    def generate(**params):
        status, body = kimi_server.post("/generate", {"input_ids": ids, "sampling_params": {"max_new_tokens": 40,
                                                                                             **params}})
        assert status == 200, body
        return json.loads(body)["output_ids"]

    def chat(**params):
        status, body = kimi_server.post("/v1/chat/completions", {"model": "m", "max_tokens": 40, **params,
                                                                 "messages": row.messages})
        assert status == 200, body
        return json.loads(body)["choices"][0]["message"]["content"]

    greedy = generate(temperature=0)
    assert [generate() for _ in range(3)] != [greedy] * 3  # /generate: SGLang's own temperature 1.0
    assert [chat() for _ in range(3)] == [chat(temperature=0)] * 3  # /v1/chat/completions: the file's


def test_a_custom_code_model_runs_the_whole_pipeline_on_the_real_server(kimi_like, kimi_server, tmp_path, capsys):
    data = tmp_path / "data"
    prompts = write_datasets(data / "prompts", rows_per_dataset=40)
    spec = quickstart(budget_tokens=BUDGET, server_args=[])
    spec["spec"]["model"].update(path="kimi-like", trustRemoteCode=True, chatTemplate={"enableThinking": False})
    spec["spec"]["merge"]["draftVocabSize"] = DRAFT_VOCAB
    spec["spec"]["datasets"][0]["chatTemplate"] = {"enableThinking": True}  # chat thinks, the others do not
    code = cli.main(["run", str(write_spec(tmp_path / "kimi.yaml", spec)), "--data-dir", str(data),
                     "--model-dir", str(kimi_like), "--server-url", kimi_server.base_url])
    out = capsys.readouterr().out
    assert code == 0, out[-4000:] + kimi_server.log_tail()
    root = data / "quickstart"
    records = [r for p in record_files(root) for r in iter_records(p)]
    assert {r["dataset"] for r in records} == set(prompts)
    for name in prompts:
        assert sum(r["completion_tokens"] for r in records if r["dataset"] == name) == BUDGET
        assert read_summary(root, name, 0).completion_tokens == BUDGET
    assert len({r["sample_id"] for r in records}) == len(records)

    # The ids sent are the custom tokenizer's own rendering of each row, thinking off as the spec says.
    tokenizer = load_tokenizer(kimi_like / "kimi-like", trust_remote_code=True)
    rows = {(name, r.row): r for name, path in prompts.items() for r in read_rows(path)}
    empty_think = [special_token_ids()["<think>"], special_token_ids()["</think>"]]
    for record in records:
        thinking = record["dataset"] == "chat"
        expected = render_conversation(tokenizer, rows[record["dataset"], record["row"]],
                                       {"enable_thinking": thinking, "thinking": thinking})
        assert record["input_ids"] == expected and (expected[-2:] == empty_think) != thinking
        assert record["completion_tokens"] == len(record["output_ids"]) and record["prompt_tokens"] == len(expected)

    # Unset sampling keys take generation_config.json's; a dataset's own keys win (the quickstart's chat
    # sets temperature 0.7, sharegpt temperature 1.0 and a seed, tools nothing).
    sampling = {r["dataset"]: r["sampling_params"] for r in records}
    assert sampling["tools"] == {**RECOMMENDED_SAMPLING, "max_new_tokens": sampling["tools"]["max_new_tokens"]}
    assert sampling["chat"]["temperature"] == 0.7 and sampling["chat"]["top_k"] == 1
    assert sampling["sharegpt"]["temperature"] == 1.0 and sampling["sharegpt"]["sampling_seed"] == 7
    manifest = json.loads((root / "corpus" / "manifest.json").read_text())
    [session, *_] = manifest["provenance"]["sessions"]
    assert session["recommended_sampling"] == RECOMMENDED_SAMPLING
    assert session["server_version"] == REAL_SGLANG_VERSION  # the samples say which server made them
    assert session["datasets"]["chat"]["chat_template_kwargs"] == {"enable_thinking": True, "thinking": True}
    assert session["datasets"]["tools"]["chat_template_kwargs"] == {"enable_thinking": False, "thinking": False}

    # The merge counted the custom tokenizer's trainable ids of the train split and mapped the draft
    # vocabulary onto the language model's, whose size it read under text_config.
    vocab = root / "corpus" / "vocab"
    counted = json.loads((vocab / "token_freq.json").read_text())["counts"]
    trainable = Counter(t for r in iter_corpus(root / "corpus", "train")
                        for t, m in zip(r["input_ids"], r["loss_mask"]) if m)
    assert {int(t): n for t, n in counted.items()} == trainable
    t2d, d2t = np.load(vocab / f"t2d-{DRAFT_VOCAB}.npy"), np.load(vocab / f"d2t-{DRAFT_VOCAB}.npy")
    assert t2d.shape == (VOCAB_SIZE,) and t2d.sum() == DRAFT_VOCAB
    assert sorted(d2t + np.arange(DRAFT_VOCAB)) == sorted(np.flatnonzero(t2d))

    # Both extraction backends over the same corpus store the same states.
    index = json.loads((root / "hidden-states" / INDEX_NAME).read_text())
    corpus_ids = {r["sample_id"] for r in iter_corpus(root / "corpus")}
    assert index["complete"] and set(index["samples"]) == corpus_ids
    sglang_out = tmp_path / "sglang-states"
    done = sglang_extract(root / "corpus", sglang_out, kimi_like / "kimi-like", "--dtype", "bf16",
                          "--server-args", json.dumps(["--trust-remote-code", "--device", "cpu",
                                                       "--attention-backend", "torch_native",
                                                       "--max-total-tokens", "4096", "--mem-fraction-static", "0.5"]))
    assert done.returncode == 0, done.stderr[-4000:]
    for sample_id in sorted(corpus_ids)[:20]:
        ours, theirs = load_sample(root / "hidden-states", sample_id), load_sample(sglang_out, sample_id)
        assert ours["input_ids"].tolist() == theirs["input_ids"].tolist()
        for states in ("aux_hidden_states", "final_hidden_state"):
            a, b = ours[states].float(), theirs[states].float()
            assert ((a - b).norm() / b.norm()).item() < BF16_RELATIVE, states

    validate = subprocess.run([sys.executable, "-m", "jobrunner", "validate", "--corpus", str(root / "corpus"),
                               "--states", str(root / "hidden-states")], capture_output=True, text=True)
    assert validate.returncode == 0, validate.stdout[-3000:] + validate.stderr[-2000:]
