"""draftgen's exports read by the trainers' own loaders: the published `datasets`, specforge 0.2.0 and
speculators 0.9.0 (devtools/draftgen_dev/trainer_packages.py installs the last two for the tests alone).

The corpus and states are the quickstart's, made by `draftgen run` with its exports: the Parquet and
speculators JSONL corpus exports, SpecForge's states (post-norm, bf16), and speculators' states
(pre-norm) extracted from the same corpus in bf16 and in fp8. Each loader must give back exactly
the ids and masks of the corpus and the tensors of draftgen's own shards.

What is called, and why that is what the trainers run:
- `datasets.load_dataset("parquet", data_files=...)`, iterated: what a trainer's data loader does.
- speculators' `_preprocess_batch` (speculators/data_generation/preprocessing.py), mapped over the
  JSONL export as its `prepare_data` maps it: pre-tokenized rows must pass through unchanged.
- SpecForge's `OfflineManifestReader` (the reader of offline EAGLE-3 features), `load_feature_file`
  (how its feature store opens each referenced file) and `normalize_offline_sample` (the EAGLE-3
  strategy's per-sample normalization its FeatureDataLoader applies).
- speculators' `ArrowDataset` with its `FileTransfer` (bf16) or `FP8Transfer` (fp8), and `CollateFn`:
  the training dataset and collator of its EAGLE-3 trainer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from draftgen_operator import cli
from draftgen_dev.demo_assets import build_model, write_datasets
from jobrunner.shared import corpus
from jobrunner.hidden_states.store import INDEX_NAME, load_sample
from jobrunner.shared.output import iter_records, record_files
from tests.local_run.conftest import quickstart, write_spec

from draftgen_dev.trainer_packages import use_trainer_packages

MAX_LEN = 4096


DRAFT_VOCAB = 64


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict[str, Path]:
    use_trainer_packages()
    base = tmp_path_factory.mktemp("quickstart")
    build_model(base / "models" / "tiny")
    data = base / "data"
    write_datasets(data / "prompts", rows_per_dataset=60)
    obj = quickstart(budget_tokens=2500)  # its exports: hf-parquet, speculators-jsonl, specforge
    # A draft vocabulary smaller than the tiny model's, so the merge writes the d2t/t2d maps.
    obj["spec"]["merge"]["draftVocabSize"] = DRAFT_VOCAB
    path = write_spec(base / "quickstart.yaml", obj)
    assert cli.main(["run", str(path), "--data-dir", str(data), "--model-dir", str(base / "models")]) == 0
    root = data / "quickstart"
    paths = {"corpus": root / "corpus", "specforge": root / "hidden-states"}
    for dtype in ("bf16", "fp8"):  # speculators trains on the pre-norm final state
        out = base / f"speculators-{dtype}"
        subprocess.run([sys.executable, "-m", "jobrunner.cli", "extract", "--corpus", str(root / "corpus"),
                        "--model", str(base / "models" / "tiny"), "--out", str(out), "--final-state", "pre-norm",
                        "--dtype", dtype, "--export", "speculators"], check=True, capture_output=True)
        paths[f"speculators-{dtype}"] = out
    # DFlash's five layers and MTP's final state, from one pre-norm forward, for both trainers.
    out = base / "more-drafters"
    subprocess.run([sys.executable, "-m", "jobrunner.cli", "extract", "--corpus", str(root / "corpus"),
                    "--model", str(base / "models" / "tiny"), "--out", str(out), "--final-state", "pre-norm",
                    "--drafters", "dflash,mtp", "--export", "specforge", "--export", "speculators"],
                   check=True, capture_output=True)
    paths["more-drafters"] = out
    return paths


def corpus_rows(corpus_dir: Path, split: str | None = None) -> list[dict]:
    return list(corpus.iter_corpus(corpus_dir, split))


def states(states_dir: Path) -> tuple[dict, list[str]]:
    """The shards' index, and the train split's sample ids in export order (train/sample_ids.json)."""
    index = json.loads((states_dir / INDEX_NAME).read_text())
    return index, json.loads((export_of(states_dir, index) / "sample_ids.json").read_text())


def export_of(states_dir: Path, index: dict, split: str = "train") -> Path:
    """What a trainer is pointed at: the export's train split (the eval split is a folder beside it)."""
    kind = "specforge" if index["run"]["final_state"] == "post-norm" else "speculators"
    return states_dir / "exports" / kind / split


def train_ids(run) -> list[str]:
    return sorted(r["sample_id"] for r in corpus_rows(run["corpus"], "train"))


def test_datasets_loads_the_parquet_export_row_for_row(run):
    from datasets import load_dataset

    exports = run["corpus"] / "exports" / "hf-parquet"
    splits = [s for s, totals in corpus.read_manifest(run["corpus"])["splits"].items() if totals["samples"]]
    loaded = load_dataset("parquet", data_files={s: str(exports / f"{s}-*.parquet") for s in splits})
    assert set(splits) == set(corpus.SPLITS), "the quickstart corpus has an eval split"
    for split in splits:  # source_id: null where a row had no id of its own (the corpus record has no key)
        want = [{**r, "source_id": r.get("source_id")} for r in corpus_rows(run["corpus"], split)]
        assert list(loaded[split]) == want, split


def test_speculators_passes_the_jsonl_export_through_unchanged(run):
    from datasets import load_dataset
    from speculators.data_generation.preprocessing import _preprocess_batch

    rows = load_dataset("json", data_files=str(run["corpus"] / "exports" / "speculators-jsonl" / "train.jsonl"),
                        split="train")
    prepared = rows.map(lambda batch: _preprocess_batch(batch, False, None, MAX_LEN), batched=True,
                        remove_columns=rows.column_names)
    want = corpus_rows(run["corpus"], "train")
    assert [(r["input_ids"], r["loss_mask"]) for r in prepared] == [(r["input_ids"], r["loss_mask"]) for r in want]
    assert [r["seq_len"] for r in prepared] == [len(r["input_ids"]) for r in want]


def test_specforge_reads_every_sample_in_draftgens_order_with_its_tensors(run):
    from specforge.algorithms.eagle3.data import normalize_offline_sample
    from specforge.runtime.data_plane.feature_store import load_feature_file
    from specforge.runtime.data_plane.offline_reader import OfflineManifestReader

    index, sample_ids = states(run["specforge"])
    refs = OfflineManifestReader(str(export_of(run["specforge"], index)), max_len=MAX_LEN).read()
    assert sample_ids == train_ids(run) and len(refs) == len(sample_ids) > 10  # past data_9: the order is numeric
    for ref in refs:
        sid = sample_ids[ref.metadata["file_index"]]
        ours = load_sample(run["specforge"], sid, index)
        raw = load_feature_file(ref.feature_store_uri.removeprefix("file://"))
        batch = normalize_offline_sample(raw, max_len=MAX_LEN)
        assert torch.equal(batch["input_ids"][0], ours["input_ids"]), sid
        # SpecForge's normalization zeroes the last position (nothing follows it to predict).
        assert torch.equal(raw["loss_mask"], ours["loss_mask"].to(torch.int64)), sid
        assert batch["loss_mask"][0, :-1].tolist() == ours["loss_mask"][:-1].tolist()
        assert torch.equal(batch["target"][0], ours["final_hidden_state"])
        assert torch.equal(batch["hidden_state"][0], ours["aux_hidden_states"].flatten(1))


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_speculators_arrow_dataset_reads_every_sample_with_its_tensors(run, dtype):
    from hs_connectors.transfer import FileTransfer, FP8Transfer
    from speculators.train.data import ArrowDataset, CollateFn

    states_dir = run[f"speculators-{dtype}"]
    index, sample_ids = states(states_dir)
    export = export_of(states_dir, index)
    transfer = (FP8Transfer if dtype == "fp8" else FileTransfer)(export / "hidden_states")
    dataset = ArrowDataset(MAX_LEN, export, transfer=transfer, on_missing="raise")
    assert sample_ids == train_ids(run) and len(dataset) == len(sample_ids)
    bf16_index, _ = states(run["speculators-bf16"])
    for i, sid in enumerate(sample_ids):
        item = dataset[i]  # a SampleUnavailable when the token ids disagree with the dataset's
        ours = load_sample(states_dir, sid, index)
        assert torch.equal(item["input_ids"], ours["input_ids"]) and torch.equal(
            item["loss_mask"], ours["loss_mask"].to(torch.int64)), sid
        aux, final = ours["aux_hidden_states"].flatten(1), ours["final_hidden_state"]
        if dtype == "bf16":
            assert torch.equal(item["hidden_states"], aux) and torch.equal(item["verifier_last_hidden_states"], final)
        else:  # dequantized by speculators, in bf16 arithmetic, against draftgen's float32 one
            torch.testing.assert_close(item["hidden_states"], aux, rtol=1.6e-2, atol=1e-3)
            want = load_sample(run["speculators-bf16"], sid, bf16_index)["final_hidden_state"].float()
            error = (item["verifier_last_hidden_states"].float() - want).norm(dim=-1) / want.norm(dim=-1)
            assert error.max() < 0.07, (sid, float(error.max()))
    batch = CollateFn(MAX_LEN, hidden_size=64)([dataset[0], dataset[1]])
    assert batch["hidden_states"].shape == (1, MAX_LEN, 3 * 64)
    assert int(batch["document_ids"].max()) == 1


def test_responses_cut_at_the_budget_are_marked_in_the_corpus_and_in_every_export(run):
    """The quickstart cuts responses at its budgets (atBudget: cut); each export says which, so a user
    can leave them out of training."""
    import pyarrow as pa
    from datasets import load_dataset

    root = run["corpus"].parent
    cut = {r["sample_id"] for f in record_files(str(root)) for r in iter_records(f) if r.get("cut_at_budget")}
    assert cut, "the quickstart cut no response at its budgets"
    assert {r["sample_id"] for r in corpus_rows(run["corpus"]) if r["cut_at_budget"]} == cut
    parquet = load_dataset("parquet", data_files=str(run["corpus"] / "exports" / "hf-parquet" / "*.parquet"),
                           split="train")
    assert {r["sample_id"] for r in parquet if r["cut_at_budget"]} == cut
    jsonl = [json.loads(line) for split in corpus.SPLITS
             for line in open(run["corpus"] / "exports" / "speculators-jsonl" / f"{split}.jsonl")]
    assert {r["sample_id"] for r in jsonl if r["cut_at_budget"]} == cut
    specforge = run["specforge"] / "exports" / "specforge"
    manifest = json.loads((specforge / "manifest.json").read_text())
    flagged = set()
    for split in manifest["splits"]:
        ids = json.loads((specforge / split / "sample_ids.json").read_text())
        for path in sorted((specforge / split).rglob("data_*.ckpt")):
            if bool(torch.load(path)["cut_at_budget"]):
                flagged.add(ids[int(path.stem.removeprefix("data_"))])
    assert flagged == cut
    arrow = run["speculators-bf16"] / "exports" / "speculators"
    rows = [r for split in manifest["splits"] for r in pa.ipc.open_stream(
        pa.memory_map(str(arrow / split / "data-00000-of-00001.arrow"))).read_all().to_pylist()]
    assert {r["sample_id"] for r in rows if r["cut_at_budget"]} == cut
    assert sum(m["cut_at_budget"] for m in manifest["splits"].values()) == len(cut)


def test_specforges_dflash_reader_takes_the_five_layer_states(run):
    """SpecForge's DFlash offline reader, normalizer and collator (its provider's own builders,
    specforge/algorithms/common/dflash_family_data.py) over the specforge-dflash export: every sample
    with its five layers concatenated in layer order."""
    from specforge.algorithms.common.dflash_family_data import (build_collator, build_offline_reader,
                                                               normalize_offline_sample)
    from specforge.runtime.data_plane.feature_store import load_feature_file

    states_dir = run["more-drafters"]
    index = json.loads((states_dir / INDEX_NAME).read_text())
    assert index["run"]["drafters"]["dflash"] == [1, 2, 3, 4, 5] == index["run"]["aux_layers"]
    export = states_dir / "exports" / "specforge-dflash"
    sample_ids = json.loads((export / "train" / "sample_ids.json").read_text())
    refs = build_offline_reader("dflash", str(export / "train"), run_id="t", ttt_length=1, max_len=MAX_LEN).read()
    manifest = json.loads((export / "manifest.json").read_text())["splits"]["train"]
    # A sample without two consecutive trained tokens (a response cut at one token) is left out, counted.
    assert len(refs) == len(sample_ids) == len(train_ids(run)) - manifest.get("left_out", 0) > 10
    batch = []
    for ref in refs:
        ours = load_sample(states_dir, sample_ids[ref.metadata["file_index"]], index)
        sample = normalize_offline_sample(load_feature_file(ref.feature_store_uri.removeprefix("file://")), MAX_LEN)
        assert torch.equal(sample["hidden_states"][0], ours["aux_hidden_states"].flatten(1).bfloat16())
        assert torch.equal(sample["input_ids"][0], ours["input_ids"])
        batch.append(sample)
    assert build_collator()(batch[:2])["hidden_states"].shape[-1] == 5 * 64


@pytest.mark.parametrize("drafter, layers", [("dflash", 5), ("mtp", 1)])
def test_speculators_reads_its_dflash_and_mtp_layouts(run, drafter, layers):
    """speculators' ArrowDataset and CollateFn as its trainer builds them for the drafter
    (num_target_layers = its draft's len(target_layer_ids): 5 for this DFlash, 1 for MTP, whose one
    target layer is the last layer's output, the pre-norm final state)."""
    from hs_connectors.transfer import FileTransfer
    from speculators.train.data import ArrowDataset, CollateFn

    states_dir = run["more-drafters"]
    index = json.loads((states_dir / INDEX_NAME).read_text())
    export = states_dir / "exports" / f"speculators-{drafter}" / "train"
    sample_ids = json.loads((export / "sample_ids.json").read_text())
    dataset = ArrowDataset(MAX_LEN, export, transfer=FileTransfer(export / "hidden_states"), on_missing="raise")
    assert len(dataset) == len(sample_ids) == len(train_ids(run))
    for i, sid in enumerate(sample_ids):
        item, ours = dataset[i], load_sample(states_dir, sid, index)
        final = ours["final_hidden_state"]
        want = ours["aux_hidden_states"].flatten(1) if drafter == "dflash" else final
        assert torch.equal(item["hidden_states"], want) and torch.equal(item["verifier_last_hidden_states"], final)
    batch = CollateFn(MAX_LEN, hidden_size=64, num_target_layers=layers)([dataset[0], dataset[1]])
    assert batch["hidden_states"].shape == (1, MAX_LEN, layers * 64)


def trainable_rows(corpus_dir: Path):
    """The train split as both trainers count it: input_ids and loss_mask as tensors."""
    from datasets import Dataset

    rows = corpus_rows(corpus_dir, "train")
    return Dataset.from_dict({"input_ids": [r["input_ids"] for r in rows],
                              "loss_mask": [r["loss_mask"] for r in rows]}).with_format("torch")


def test_the_merges_vocabulary_is_speculators_own_and_loads_where_each_trainer_looks(run, tmp_path):
    """speculators' own counting and builder on the same corpus give the same counts and maps; its
    trainer finds them in the export's data path by --draft-vocab-size; SpecForge's draft model loads
    the vocab_mapping file into its buffers."""
    import argparse
    from types import SimpleNamespace

    import numpy as np
    from speculators.train.cli import parse_vocab_mappings
    from speculators.train.vocab_mapping import (build_vocab_mappings_from_distribution,
                                                 save_token_frequency_distribution)

    from specforge.modeling.draft.base import Eagle3DraftModel

    vocab = run["corpus"] / "vocab"
    model = run["corpus"].parent.parent.parent / "models" / "tiny"
    target = json.loads((model / "config.json").read_text())["vocab_size"]
    save_token_frequency_distribution(trainable_rows(run["corpus"]), tmp_path / "theirs.pt")
    theirs = torch.load(tmp_path / "theirs.pt", weights_only=True)
    data_path = export_of(run["speculators-bf16"], states(run["speculators-bf16"])[0])
    assert torch.load(data_path / "token_freq.pt", weights_only=True) == theirs
    counted = json.loads((vocab / "token_freq.json").read_text())["counts"]
    assert {int(t): n for t, n in counted.items()} == theirs
    d2t, t2d = build_vocab_mappings_from_distribution(theirs, DRAFT_VOCAB, target)
    assert torch.equal(torch.from_numpy(np.load(vocab / f"d2t-{DRAFT_VOCAB}.npy")), d2t)
    assert torch.equal(torch.from_numpy(np.load(vocab / f"t2d-{DRAFT_VOCAB}.npy")), t2d)

    args = argparse.Namespace(d2t_path=None, t2d_path=None, data_path=str(data_path), draft_vocab_size=DRAFT_VOCAB,
                              token_freq_path=None, verifier_name_or_path=None, trust_remote_code=False)
    loaded_d2t, loaded_t2d, size = parse_vocab_mappings(args)  # found, not rebuilt: no verifier needed
    assert size == DRAFT_VOCAB and torch.equal(loaded_d2t, d2t) and torch.equal(loaded_t2d, t2d)

    buffers = SimpleNamespace(t2d=torch.ones(target, dtype=torch.bool), d2t=torch.zeros(DRAFT_VOCAB, dtype=torch.int64))
    Eagle3DraftModel.load_vocab_mapping(buffers, str(run["specforge"] / "exports" / "specforge" /
                                                      f"vocab_mapping-{DRAFT_VOCAB}.pt"))
    assert torch.equal(buffers.d2t, d2t) and torch.equal(buffers.t2d, t2d) and buffers.vocab_mapping_loaded


def test_specforges_own_builder_differs_only_among_tokens_tied_at_the_boundary(run):
    """SpecForge breaks ties in the order it first counted tokens; speculators (and draftgen) by the
    lower id: the chosen sets may differ only in tokens whose count equals the last one chosen."""
    from collections import Counter

    from specforge.data.preprocessing import process_token_dict_to_mappings

    counted = json.loads((run["corpus"] / "vocab" / "token_freq.json").read_text())["counts"]
    counts = {int(t): n for t, n in counted.items()}
    target = int(np.load(run["corpus"] / "vocab" / f"t2d-{DRAFT_VOCAB}.npy").shape[0])
    theirs, _ = process_token_dict_to_mappings(Counter(counts), DRAFT_VOCAB, target)
    ours = np.load(run["corpus"] / "vocab" / f"d2t-{DRAFT_VOCAB}.npy")
    theirs_ids = set((theirs + torch.arange(DRAFT_VOCAB)).tolist())
    ours_ids = set((ours + np.arange(DRAFT_VOCAB)).tolist())
    boundary = min(counts.get(t, 0) for t in ours_ids)
    assert all(counts.get(t, 0) == boundary for t in theirs_ids ^ ours_ids), sorted(theirs_ids ^ ours_ids)


def test_jobrunner_validate_passes_every_state_folder(run):
    for states_dir in (run["specforge"], run["speculators-bf16"], run["speculators-fp8"]):
        done = subprocess.run([sys.executable, "-m", "jobrunner.cli", "validate", "--corpus", str(run["corpus"]),
                               "--states", str(states_dir)], capture_output=True, text=True)
        assert done.returncode == 0 and "no problem found" in done.stdout, done.stdout + done.stderr


def test_speculators_trains_an_eagle3_draft_on_the_export_for_a_few_steps_on_the_cpu(run, tmp_path):
    """speculators' own draft model, vocabulary loading, dataset, collation and batch shift, fed
    draftgen's export; the optimizer steps as its Trainer takes them (its Trainer itself needs an
    accelerator: speculators/train/trainer.py falls back to "cuda" with none, and moves each batch
    to `local_rank`). The loss is finite and falls."""
    import argparse

    from hs_connectors.transfer import FileTransfer
    from speculators.model import SpeculatorModel
    from speculators.models.eagle3.data import shift_batch
    from speculators.train.cli import build_draft_model, parse_vocab_mappings
    from speculators.train.config import TrainConfig
    from speculators.train.data import ArrowDataset, CollateFn

    index, _ = states(run["speculators-bf16"])
    data_path = export_of(run["speculators-bf16"], index)
    model = run["corpus"].parent.parent.parent / "models" / "tiny"
    cfg = TrainConfig.from_flat({"verifier_name_or_path": str(model), "data_path": str(data_path),
                                 "draft_vocab_size": DRAFT_VOCAB, "save_path": str(tmp_path / "draft"),
                                 "draft_attn_impl": "sdpa", "hidden_states_dtype": "float32",
                                 "loss_implementation": "eager"})  # the fused loss is a Triton kernel: GPUs only
    args = argparse.Namespace(**cfg.flatten())
    d2t, t2d, size = parse_vocab_mappings(args)
    draft = build_draft_model(args, SpeculatorModel.registry[args.speculator_type], t2d, d2t, size)
    dataset = ArrowDataset(MAX_LEN, data_path, transfer=FileTransfer(data_path / "hidden_states"), on_missing="raise",
                           hidden_states_dtype=torch.float32)
    collate = CollateFn(MAX_LEN, hidden_size=draft.config.transformer_layer_config.hidden_size,
                        num_target_layers=len(draft.target_layer_ids), dtype=torch.float32, preprocess=shift_batch)
    batch = collate([dataset[i] for i in range(4)])
    train_kwargs, _ = type(draft).get_trainer_kwargs(**vars(args))  # the loss, the TTT steps, as its CLI does
    optimizer = torch.optim.AdamW(draft.parameters(), lr=1e-3)
    losses = []
    for _ in range(8):
        _, loss, _ = draft(**batch, **train_kwargs)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    assert all(np.isfinite(losses)) and losses[-1] < losses[0], losses


def specforge_target(model: Path, folder: Path) -> Path:
    """The tiny model as SpecForge's TargetHead reads a target: it finds lm_head through a
    `*.index.json` (specforge/modeling/target/target_head.py, `load_weights`), which a model saved
    in one file has not; the released models it targets are sharded and have one."""
    from safetensors import safe_open

    folder.mkdir()
    for path in model.iterdir():
        (folder / path.name).symlink_to(path)
    with safe_open(str(model / "model.safetensors"), "pt") as f:
        weight_map = {key: "model.safetensors" for key in f.keys()}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


def specforge_metrics(stdout: str) -> tuple[list[dict], list[dict]]:
    """The training steps' and the evaluations' metrics, as SpecForge's console logger prints them
    (`step N: {...}`, specforge/training/assembly.py `_logger`)."""
    import ast
    import re

    logged = [ast.literal_eval(m.group(1)) for m in re.finditer(r"^step \d+: (\{.*\})$", stdout, re.M)]
    return [m for m in logged if "loss" in m], [m for m in logged if "eval/avg_loss" in m]


def test_specforges_own_kernel_stops_on_the_cpu_where_its_reference_loss_runs(run):
    from specforge.core.loss import LogSoftmaxLoss

    from .specforge_on_cpu import reference_loss

    logits, target = torch.randn(1, 3, 8), torch.softmax(torch.randn(1, 3, 8), -1)
    mask = torch.ones(1, 3, 1)
    with pytest.raises(RuntimeError, match="active drivers"):  # Triton finds no GPU driver
        LogSoftmaxLoss.apply(logits, target, mask)
    want = -(target * torch.log_softmax(logits, -1)).sum(-1).mean()
    torch.testing.assert_close(reference_loss(logits, target, mask), want)


def test_specforge_trains_an_eagle3_draft_on_the_export_with_its_own_command_line(run, tmp_path):
    """`specforge train` on the specforge export, on the CPU (tests/trainers/specforge_on_cpu.py
    says what it changes: the Triton loss kernel, for SpecForge's own reference), with draftgen's
    vocabulary mapping and eval split. Four samples, one batch, six steps: the loss is finite and
    falls, and the draft it saves carries draftgen's d2t."""
    import yaml

    from draftgen_dev.trainer_packages import trainer_packages

    model = run["corpus"].parent.parent.parent / "models" / "tiny"
    export = run["specforge"] / "exports" / "specforge"
    target_config = json.loads((model / "config.json").read_text())
    draft_config = tmp_path / "draft.json"  # SpecForge derives 32000 draft tokens otherwise
    draft_config.write_text(json.dumps({**target_config, "architectures": ["LlamaForCausalLMEagle3"],
                                        "num_hidden_layers": 1, "draft_vocab_size": DRAFT_VOCAB}))
    train = tmp_path / "train" / "rows_00000000-00001000"  # the same batch each step: the loss must fall
    train.mkdir(parents=True)
    for path in sorted((export / "train").rglob("data_*.ckpt"))[:4]:
        (train / path.name).symlink_to(path)
    steps = 6
    config = {"model": {"target_model_path": str(specforge_target(model, tmp_path / "target")),
                        "draft_model_config": str(draft_config),
                        "vocab_mapping_path": str(export / f"vocab_mapping-{DRAFT_VOCAB}.pt")},
              "data": {"hidden_states_path": str(train.parent), "eval_hidden_states_path": str(export / "eval"),
                       "max_length": MAX_LEN, "dataloader_num_workers": 0, "cache_dir": str(tmp_path / "cache")},
              "training": {"max_steps": steps, "num_epochs": steps, "batch_size": 4, "fsdp_sharding": "NO_SHARD",
                           "attention_backend": "sdpa", "learning_rate": 1e-3, "lr_scheduler": "constant",
                           "warmup_ratio": 0.0, "ttt_length": 3, "log_interval": 1, "eval_interval": steps},
              "output_dir": str(tmp_path / "out")}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    done = subprocess.run([sys.executable, str(Path(__file__).parent / "specforge_on_cpu.py"),
                           str(tmp_path / "run.yaml")], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(trainer_packages())})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    trained, evaluated = specforge_metrics(done.stdout)
    losses = [m["loss"] for m in trained]
    assert len(losses) == steps and all(np.isfinite(losses)) and losses[-1] < losses[0], losses
    assert trained[-1]["grad_norm"] < trained[0]["grad_norm"]
    assert evaluated and np.isfinite(evaluated[-1]["eval/avg_loss"])  # it read the eval split
    saved = torch.load(tmp_path / "out" / f"specforge-run-step{steps}" / "training_state.pt", weights_only=False)
    d2t = torch.from_numpy(np.load(run["corpus"] / "vocab" / f"d2t-{DRAFT_VOCAB}.npy"))
    assert torch.equal(saved["draft_state_dict"]["d2t"], d2t) and saved["dataset_size"] == 4
