"""Exports of the corpus and of the extracted states into the layouts other tools read (docs/formats.md).

Corpus exports (`jobrunner merge --export KIND`, into CORPUS/exports/KIND/):
- `hf-parquet`: one Parquet file per corpus shard, for `datasets.load_dataset("parquet", ...)`.
- `speculators-jsonl`: `{split}.jsonl` rows with `input_ids` + `loss_mask`, the pre-tokenized input
  that vllm-project/speculators' `scripts/prepare_data.py --data FILE.jsonl` passes through unchanged
  (`_passthrough_pretokenized` in speculators/data_generation/preprocessing.py, seen at c05b95b).

State exports (`jobrunner extract --export KIND`, into OUT/exports/KIND/), one file per sample in
sample-id order, with `sample_ids.json` giving each file's sample:
- `specforge`: `rows_{g}-{g+1000}/data_{i}.ckpt` (torch.save) with `input_ids` [L], `loss_mask` [L],
  `hidden_state` [1, L, H] (post-norm) and `aux_hidden_state` [1, L, K*H]: the keys SpecForge's
  offline reader requires (specforge/runtime/data_plane/offline_reader.py, seen at a6b6b02).
- `speculators`: `hidden_states/hs_{i}.safetensors` with `token_ids` [L] and `hidden_states`
  [L, K+1, H] (aux layers, then the pre-norm final state), beside `data.jsonl` (row i = hs_i:
  `input_ids`, `loss_mask`, `seq_len`), the layout speculators' ArrowDataset reads
  (speculators/train/data.py) once `data.jsonl` is saved as a datasets Arrow directory.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from jobrunner import corpus

CORPUS_EXPORTS = ("hf-parquet", "speculators-jsonl")
STATE_EXPORTS = ("specforge", "speculators")
SPECFORGE_GROUP = 1000  # files per rows_* folder, as SpecForge's prepare_hidden_states groups them
PARQUET_ROW_GROUP = 1000


def _fresh(directory: Path) -> Path:
    """An export is rebuilt whole: built beside its final place, then swapped in."""
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def _commit(tmp: Path, directory: Path) -> Path:
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(tmp, directory)
    return directory


def export_corpus(corpus_dir: str | os.PathLike, kind: str) -> Path:
    corpus_dir = Path(corpus_dir)
    target = corpus_dir / "exports" / kind
    tmp = _fresh(target)
    if kind == "hf-parquet":
        _parquet(corpus_dir, tmp)
    elif kind == "speculators-jsonl":
        for split in corpus.SPLITS:
            with open(tmp / f"{split}.jsonl", "w") as f:
                for r in corpus.iter_corpus(corpus_dir, split):
                    f.write(json.dumps({"sample_id": r["sample_id"], "input_ids": r["input_ids"],
                                        "loss_mask": r["loss_mask"]}, separators=(",", ":")) + "\n")
    else:
        raise ValueError(f"export {kind!r}: expected one of {CORPUS_EXPORTS}")
    return _commit(tmp, target)


def _parquet(corpus_dir: Path, out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("sample_id", pa.string()), ("dataset", pa.string()), ("prompt_len", pa.int32()),
                        ("finish_reason", pa.string()), ("truncated", pa.bool_()),
                        ("input_ids", pa.list_(pa.int32())), ("loss_mask", pa.list_(pa.int8()))])
    for shard in corpus.read_manifest(corpus_dir)["shards"]:
        with pq.ParquetWriter(out / shard["name"].replace(".jsonl", ".parquet"), schema) as writer:
            rows: list[dict] = []
            with open(corpus_dir / shard["name"], "rb") as f:
                for line in f:
                    rows.append(json.loads(line))
                    if len(rows) == PARQUET_ROW_GROUP:
                        writer.write_table(pa.Table.from_pylist(rows, schema))
                        rows = []
            if rows:
                writer.write_table(pa.Table.from_pylist(rows, schema))


def export_states(states_dir: str | os.PathLike, kind: str) -> Path:
    import torch
    from safetensors.torch import save_file

    from jobrunner.hidden_states.store import INDEX_NAME, load_sample

    states_dir = Path(states_dir)
    index = json.loads((states_dir / INDEX_NAME).read_text())
    final_state = index["run"]["final_state"]
    needed = {"specforge": "post-norm", "speculators": "pre-norm"}.get(kind)
    if needed is None:
        raise ValueError(f"export {kind!r}: expected one of {STATE_EXPORTS}")
    if final_state != needed:
        raise ValueError(f"{kind} trains on the {needed} final state; these states hold {final_state} "
                         f"(extract again with --final-state {needed})")
    target = states_dir / "exports" / kind
    tmp = _fresh(target)
    sample_ids = sorted(index["samples"])
    jsonl = open(tmp / "data.jsonl", "w") if kind == "speculators" else None
    try:
        for i, sid in enumerate(sample_ids):
            s = load_sample(states_dir, sid, index)
            ids, mask = s["input_ids"].to(torch.int64), s["loss_mask"].to(torch.int64)
            aux, final = s["aux_hidden_states"], s["final_hidden_state"]
            if kind == "specforge":
                group = i // SPECFORGE_GROUP * SPECFORGE_GROUP
                folder = tmp / f"rows_{group}-{group + SPECFORGE_GROUP}"
                folder.mkdir(exist_ok=True)
                torch.save({"input_ids": ids, "loss_mask": mask, "hidden_state": final.unsqueeze(0),
                            "aux_hidden_state": aux.reshape(aux.shape[0], -1).unsqueeze(0)}, folder / f"data_{i}.ckpt")
            else:
                (tmp / "hidden_states").mkdir(exist_ok=True)
                save_file({"token_ids": ids, "hidden_states": torch.cat([aux, final.unsqueeze(1)], dim=1).contiguous()},
                          str(tmp / "hidden_states" / f"hs_{i}.safetensors"))
                jsonl.write(json.dumps({"input_ids": ids.tolist(), "loss_mask": mask.tolist(), "seq_len": len(ids)},
                                       separators=(",", ":")) + "\n")
    finally:
        if jsonl:
            jsonl.close()
    (tmp / "sample_ids.json").write_text(json.dumps(sample_ids))
    return _commit(tmp, target)
