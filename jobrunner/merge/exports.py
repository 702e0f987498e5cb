"""The corpus's exports into the layouts other tools read (`jobrunner merge --export KIND`, into
CORPUS/exports/KIND/):
- `hf-parquet`: one Parquet file per corpus shard, for `datasets.load_dataset("parquet", ...)`.
- `speculators-jsonl`: `{split}.jsonl` rows with `input_ids` + `loss_mask` (and `sample_id`,
  `truncated`, `cut_at_budget`, which its preparation leaves behind), the pre-tokenized input
  that vllm-project/speculators' `scripts/prepare_data.py --data FILE.jsonl` passes through unchanged
  (`_passthrough_pretokenized` in speculators/data_generation/preprocessing.py, seen at c05b95b).

The formats: docs/formats.md."""

from __future__ import annotations

import json
import os
from pathlib import Path

from jobrunner.shared import corpus
from jobrunner.shared.export_folder import commit, fresh

CORPUS_EXPORTS = ("hf-parquet", "speculators-jsonl")
PARQUET_ROW_GROUP = 1000


def export_corpus(corpus_dir: str | os.PathLike, kind: str) -> Path:
    corpus_dir = Path(corpus_dir)
    target = corpus_dir / "exports" / kind
    tmp = fresh(target)
    if kind == "hf-parquet":
        _parquet(corpus_dir, tmp)
    elif kind == "speculators-jsonl":
        for split in corpus.SPLITS:
            with open(tmp / f"{split}.jsonl", "w") as f:
                for r in corpus.iter_corpus(corpus_dir, split):
                    f.write(json.dumps({"sample_id": r["sample_id"], "truncated": r["truncated"],
                                        "cut_at_budget": r["cut_at_budget"], "input_ids": r["input_ids"],
                                        "loss_mask": r["loss_mask"]}, separators=(",", ":")) + "\n")
    else:
        raise ValueError(f"export {kind!r}: expected one of {CORPUS_EXPORTS}")
    return commit(tmp, target)


def _parquet(corpus_dir: Path, out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("sample_id", pa.string()), ("dataset", pa.string()), ("prompt_len", pa.int32()),
                        ("finish_reason", pa.string()), ("truncated", pa.bool_()), ("cut_at_budget", pa.bool_()),
                        ("input_ids", pa.list_(pa.int32())), ("loss_mask", pa.list_(pa.int8())),
                        ("source_id", pa.string())])  # null where the row had no id of its own
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
