"""The extracted states' exports into the layouts trainers read (`jobrunner extract --export KIND`, into
OUT/exports/KIND/SPLIT/, train and eval apart, so a trainer pointed at `train/` never sees the eval
split; for each drafter the states serve that KIND trains, EAGLE-3's in KIND/, the others' in
KIND-<drafter>/, each with its drafter's layers alone, draftgen_contracts/drafters.py), one file per
sample in sample-id order, with `sample_ids.json` giving each file's sample and
`OUT/exports/KIND/manifest.json` each split's counts; the merge's draft-vocabulary files
(jobrunner/shared/vocabulary.py) go where each trainer looks for them (`_with_vocabulary`):
- `specforge`: `rows_{g:08d}-{g+1000:08d}/data_{i:08d}.ckpt` (torch.save) with `input_ids` [L],
  `loss_mask` [L], `hidden_state` [1, L, H] (post-norm) and `aux_hidden_state` [1, L, K*H], in bf16
  (fp8 states dequantized): the keys SpecForge's offline reader requires; and `truncated`,
  `cut_at_budget` (0-d bool tensors) it leaves alone. Its reader lists the files
  sorted by path (`list_feature_files` in specforge/runtime/data_plane/offline_reader.py, specforge
  0.2.0) and numbers them in that order, so the numbers are zero-padded: its file i is our file i.
- `speculators`: the folder is the `datapath` of speculators' ArrowDataset (speculators/train/data.py,
  speculators 0.9.0): a `datasets` Arrow directory (`data-00000-of-00001.arrow`, `state.json` with
  the torch format its `torch.equal` of token ids needs, `dataset_info.json`) whose row i holds
  `input_ids`, `loss_mask`, `seq_len`, `sample_id`, `truncated` and `cut_at_budget`, beside `hidden_states/hs_{i}.safetensors`
  with `token_ids` [L] and `hidden_states` [L, K+1, H] (aux layers, then the pre-norm final state);
  fp8 states stay fp8 with `hidden_states_scales` [L, K+1, 1] for its FP8Transfer.

The formats: docs/formats.md."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from draftgen_contracts import drafters
from draftgen_contracts.hidden_state_layout import EXPORT_FINAL_STATE
from jobrunner.hidden_states.store import INDEX_NAME, load_sample
from jobrunner.shared import corpus
from jobrunner.shared.export_folder import commit, fresh

STATE_EXPORTS = tuple(EXPORT_FINAL_STATE)
SPECFORGE_GROUP = 1000  # files per rows_* folder, as SpecForge's prepare_hidden_states groups them


def corpus_facts(corpus_dir: str | os.PathLike) -> dict[str, tuple[str, bool, bool]]:
    """sample id -> (its split, truncated, cut_at_budget), from the corpus the states came from."""
    return {r["sample_id"]: (split, r["truncated"], r.get("cut_at_budget", False))
            for split in corpus.SPLITS for r in corpus.iter_heads(corpus_dir, split)}


def export_states(states_dir: str | os.PathLike, kind: str, corpus_dir: str | os.PathLike) -> list[Path]:
    """`kind`'s layout for each drafter the states serve that it trains (draftgen_contracts/drafters.py),
    into `exports/<folder>/`; returns the folders written."""
    states_dir = Path(states_dir)
    index = json.loads((states_dir / INDEX_NAME).read_text())
    if kind not in STATE_EXPORTS:
        raise ValueError(f"export {kind!r}: expected one of {STATE_EXPORTS}")
    served = served_drafters(index["run"])
    chosen = drafters.exports_for(kind, list(served))
    if not chosen:
        raise ValueError(f"{kind} trains none of the drafters these states serve ({', '.join(served)}): "
                         f"it trains {', '.join(drafters.EXPORT_DRAFTERS[kind])}")
    facts = corpus_facts(corpus_dir)
    return [export_drafter(states_dir, index, kind, d, served[d], facts, Path(corpus_dir)) for d in chosen]


def served_drafters(run: dict) -> dict[str, list[int]]:
    """drafter -> the layers it reads; states extracted before drafters were named served EAGLE-3 alone."""
    return run.get("drafters") or {"eagle3": run["aux_layers"]}


def export_drafter(states_dir: Path, index: dict, kind: str, drafter: str, layers: list[int],
                   facts: dict[str, tuple[str, bool, bool]], corpus_dir: Path) -> Path:
    """One complete trainer input per split, `<folder>/train/` and `<folder>/eval/`, so the eval split
    never leaks into what a trainer is pointed at; `manifest.json` beside them lists each split's
    samples and how many were truncated or cut at the budget."""
    final_state = index["run"]["final_state"]
    needed = EXPORT_FINAL_STATE[kind]
    if final_state != needed and (kind, drafter) not in drafters.IGNORES_FINAL_STATE:
        raise ValueError(f"{kind} trains {drafter} on the {needed} final state; these states hold {final_state} "
                         f"(extract again with --final-state {needed})")
    target = states_dir / "exports" / drafters.export_folder(kind, drafter)
    tmp = fresh(target)
    picked = [index["run"]["aux_layers"].index(layer) for layer in layers]
    splits = {}
    for split in corpus.SPLITS:
        sample_ids = sorted(sid for sid in index["samples"] if facts[sid][0] == split)
        if sample_ids:
            (tmp / split).mkdir()
            written = _export_split(states_dir, index, kind, drafter, picked, sample_ids, facts, tmp / split)
            splits[split] = {"folder": split, "samples": len(written), "sample_ids": f"{split}/sample_ids.json",
                             "truncated": sum(facts[s][1] for s in written),
                             "cut_at_budget": sum(facts[s][2] for s in written),
                             **({"left_out": len(sample_ids) - len(written)} if len(written) < len(sample_ids) else {})}
    vocab = _with_vocabulary(corpus_dir, kind, tmp)
    (tmp / "manifest.json").write_text(json.dumps({"kind": kind, "drafter": drafter, "aux_layers": layers,
                                                   "final_state": final_state, "splits": splits,
                                                   "vocabulary": vocab}, indent=2))
    return commit(tmp, target)


def _with_vocabulary(corpus_dir: Path, kind: str, out: Path) -> list[str]:
    """The merge's draft vocabulary where each trainer looks for it: speculators in its data path
    (train/: token_freq.pt, d2t-N.npy, t2d-N.npy, found by --draft-vocab-size N), SpecForge beside
    the splits (vocab_mapping-N.pt, for model.vocab_mapping_path). Returns what was written."""
    from jobrunner.shared import vocabulary

    into = out / "train" if kind == "speculators" else out
    if not into.is_dir() or not (corpus_dir / vocabulary.FOLDER / vocabulary.COUNTS_FILE).exists():
        return []  # no train split, or a corpus merged before the vocabulary was counted
    return [str((into / name).relative_to(out)) for name in vocabulary.torch_files(corpus_dir, kind, into)]


def _export_split(states_dir: Path, index: dict, kind: str, drafter: str, picked: list[int],
                  sample_ids: list[str], facts: dict[str, tuple[str, bool, bool]], out: Path) -> list[str]:
    """The split's files; returns the samples written (SpecForge's DFlash takes only samples with two
    consecutive trained tokens: normalize_offline_sample, specforge/algorithms/common/dflash_family_data.py)."""
    import torch
    from safetensors.torch import save_file

    rows = ArrowDatasetWriter(out) if kind == "speculators" else None
    written: list[str] = []
    for sid in sample_ids:
        # SpecForge reads bf16 states; speculators' FP8Transfer dequantizes fp8 values and scales itself.
        s = load_sample(states_dir, sid, index, dequantize=kind == "specforge")
        ids, mask = s["input_ids"].to(torch.int64), s["loss_mask"].to(torch.int64)
        if (kind, drafter) == ("specforge", "dflash") and not bool((mask[1:] & mask[:-1]).any()):
            continue  # SpecForge's DFlash refuses a sample without two consecutive trained tokens
        i = len(written)
        written.append(sid)
        _, truncated, cut = facts[sid]
        if kind == "specforge":
            group = i // SPECFORGE_GROUP * SPECFORGE_GROUP
            folder = out / f"rows_{group:08d}-{group + SPECFORGE_GROUP:08d}"
            folder.mkdir(exist_ok=True)
            tensors = specforge_tensors(drafter, ids, mask, s["aux_hidden_states"][:, picked], s["final_hidden_state"],
                                        truncated, cut)
            # clone(): torch.save writes a view's whole storage, here the whole shard the sample was read
            # from, into every file (measured: 2.9 MB a file for 0.1 MB of states).
            torch.save({k: t.clone() for k, t in tensors.items()}, folder / f"data_{i:08d}.ckpt")
        else:
            (out / "hidden_states").mkdir(exist_ok=True)
            aux, final, scales = speculators_inputs(drafter, s, picked)
            save_file(speculators_tensors(ids, aux, final, scales), str(out / "hidden_states" / f"hs_{i}.safetensors"))
            rows.add({"sample_id": sid, "input_ids": ids.tolist(), "loss_mask": mask.tolist(), "seq_len": len(ids),
                      "truncated": truncated, "cut_at_budget": cut})
    if rows is not None:
        rows.close()
    (out / "sample_ids.json").write_text(json.dumps(written))
    return written


def specforge_tensors(drafter: str, ids, mask, aux, final, truncated: bool, cut: bool) -> dict:
    """The keys SpecForge's offline reader requires for the drafter (its FeatureContract's storage
    tensors, specforge/algorithms/*/providers.py): EAGLE-3 `hidden_state` [1, L, H] (the post-norm
    final state) and `aux_hidden_state` [1, L, K*H]; DFlash `hidden_states` [1, L, K*H]. The two flags
    ride along as 0-d tensors; its loader reads only the keys it names."""
    import torch

    flat = aux.reshape(aux.shape[0], -1).unsqueeze(0)
    states = ({"hidden_state": final.unsqueeze(0), "aux_hidden_state": flat} if drafter == "eagle3"
              else {"hidden_states": flat})
    return {"input_ids": ids, "loss_mask": mask, **states, "truncated": torch.tensor(truncated),
            "cut_at_budget": torch.tensor(cut)}


def speculators_tensors(ids, aux, final, scales: tuple | None) -> dict:
    """hs_i's tensors: `token_ids` and `hidden_states` [L, K+1, H] (aux layers, then the final state),
    and for fp8 states `hidden_states_scales` [L, K+1, 1] (`scales` = the aux and final scales), the key
    speculators' FP8Transfer dequantizes with (hs_connectors/fp8_utils.py SCALES_KEY, hs-connectors 0.9.0)."""
    import torch

    states = {"token_ids": ids, "hidden_states": torch.cat([aux, final.unsqueeze(1)], dim=1).contiguous()}
    if scales is not None:
        states["hidden_states_scales"] = torch.cat([scales[0], scales[1].unsqueeze(1)], dim=1).contiguous()
    return states


def speculators_inputs(drafter: str, sample: dict, picked: list[int]) -> tuple:
    """(aux, final, scales or None) of speculators' layout for the drafter: the picked layers, or for
    MTP the final state as its one auxiliary state (its drafter reads the last layer's output)."""
    final = sample["final_hidden_state"]
    scaled = "final_hidden_state_scales" in sample
    if drafter == "mtp":
        scales = (sample["final_hidden_state_scales"].unsqueeze(1), sample["final_hidden_state_scales"]) \
            if scaled else None
        return final.unsqueeze(1), final, scales
    scales = (sample["aux_hidden_states_scales"][:, picked], sample["final_hidden_state_scales"]) if scaled else None
    return sample["aux_hidden_states"][:, picked], final, scales


ARROW_FILE = "data-00000-of-00001.arrow"
ARROW_BATCH_ROWS = 1000


class ArrowDatasetWriter:
    """Rows written as the directory `datasets.Dataset.save_to_disk` makes and `datasets.load_from_disk`
    reads (datasets/arrow_dataset.py): the table as one Arrow IPC stream, written a batch at a time;
    `state.json` naming it, with the format rows are returned in (torch, as speculators' prepare_data
    sets before it saves); `dataset_info.json` (the features are inferred from the stream's schema)."""

    SCHEMA = (("sample_id", "string"), ("input_ids", "ids"), ("loss_mask", "ids"), ("seq_len", "int64"),
              ("truncated", "bool"), ("cut_at_budget", "bool"))

    def __init__(self, directory: Path):
        import pyarrow as pa

        self._pa = pa
        types = {"string": pa.string(), "ids": pa.list_(pa.int64()), "int64": pa.int64(), "bool": pa.bool_()}
        self.schema = pa.schema([(name, types[kind]) for name, kind in self.SCHEMA])
        self.directory = directory
        self._sink = pa.OSFile(str(directory / ARROW_FILE), "wb")
        self._writer = pa.ipc.new_stream(self._sink, self.schema)
        self._rows: list[dict] = []
        self._digest = hashlib.sha256()

    def add(self, row: dict) -> None:
        self._rows.append(row)
        self._digest.update(row["sample_id"].encode())
        if len(self._rows) >= ARROW_BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._rows:
            self._writer.write_table(self._pa.Table.from_pylist(self._rows, self.schema))
            self._rows = []

    def close(self) -> None:
        self._flush()
        self._writer.close()
        self._sink.close()
        state = {"_data_files": [{"filename": ARROW_FILE}], "_fingerprint": self._digest.hexdigest()[:16],
                 "_format_columns": None, "_format_kwargs": {}, "_format_type": "torch",
                 "_output_all_columns": False, "_split": None}
        (self.directory / "state.json").write_text(json.dumps(state, indent=2))
        (self.directory / "dataset_info.json").write_text(json.dumps({"description": "draftgen hidden-state export"}))
