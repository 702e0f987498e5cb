"""The merged training corpus: its on-disk format, its writer and its reader (docs/formats.md).

A corpus directory holds JSON Lines shards `train-00000.jsonl`, `eval-00000.jsonl`, ... and one
`manifest.json`. Each line is one sample:

    {"sample_id": "ds/000000042", "dataset": "ds", "prompt_len": P, "finish_reason": "stop",
     "truncated": false, "cut_at_budget": false, "input_ids": [prompt ids..., response ids...],
     "loss_mask": [0]*P + [1]*R}

`cut_at_budget`: the response was cut where its replica's share of the budget was made
(`atBudget: cut`), so it lacks its ending (its finish reason is `length`, its `truncated` flag the
merge's policy's);

with the source row's own id after `cut_at_budget` (`"source_id": "req-17"`) when its dataset gave one
(a `fields.id` column, a batch request's custom_id: docs/inputs.md#ids).

The manifest is the commit point: it is written last (temp file + rename) and readers open only the
shards it lists, so a merge killed half-way leaves the previous corpus readable and complete.
JSON Lines (not Parquet) because it streams with the standard library and is byte-deterministic;
the Parquet export (jobrunner/merge/exports.py) is for `datasets.load_dataset`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from draftgen_contracts import names

CORPUS_VERSION = 1
MANIFEST_NAME = "manifest.json"
SPLITS = ("train", "eval")


def loss_mask(prompt_len: int, response_len: int) -> list[int]:
    """0 on the prompt, 1 on every generated token (thinking and tool-call tokens are generated too)."""
    return [0] * prompt_len + [1] * response_len


def encode_record(sample_id: str, dataset: str, prompt_json: str, response_json: str, prompt_len: int,
                  response_len: int, finish_reason: str, truncated: bool, cut_at_budget: bool = False,
                  source_id: str | None = None) -> bytes:
    """One corpus line, from the prompt's and the response's compact JSON arrays. Spliced by hand
    rather than json.dumps(dict): this is the merge's inner loop, and the token lists are serialised
    once; the result is the same canonical JSON either way (tests check it against json.loads)."""
    mask = ("0," * prompt_len + "1," * response_len)[:-1]
    head = json.dumps({"sample_id": sample_id, "dataset": dataset, "prompt_len": prompt_len,
                       "finish_reason": finish_reason, "truncated": truncated, "cut_at_budget": cut_at_budget,
                       **({"source_id": source_id} if source_id is not None else {})}, separators=(",", ":"))
    return f'{head[:-1]},"input_ids":{prompt_json[:-1]},{response_json[1:]},"loss_mask":[{mask}]}}\n'.encode()


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


class ShardWriter:
    """Writes one split's shards: each one to `<name>.tmp`, renamed into place when full or closed.

    A shard is full at `max_records` records or `max_bytes` bytes, whichever comes first (a record is
    never split). The sha256 is computed while writing, so no shard is read back.
    """

    def __init__(self, directory: str | os.PathLike, split: str, max_records: int | None, max_bytes: int | None):
        if not max_records and not max_bytes:
            raise ValueError("a shard size is needed: records per shard or bytes per shard")
        self.directory = Path(directory)
        self.split = split
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.shards: list[dict] = []
        self._file = None

    def _open(self) -> None:
        name = names.corpus_shard_name(self.split, len(self.shards))
        self._file = open(self.directory / (name + ".tmp"), "wb", buffering=1 << 20)
        self._current = {"name": name, "split": self.split, "records": 0, "tokens": 0, "bytes": 0}
        self._hash = hashlib.sha256()

    def _close_current(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None
        name = self._current["name"]
        os.replace(self.directory / (name + ".tmp"), self.directory / name)
        self._current["sha256"] = self._hash.hexdigest()
        self.shards.append(self._current)

    def write(self, line: bytes, tokens: int) -> None:
        if self._file is None:
            self._open()
        self._file.write(line)
        self._hash.update(line)
        c = self._current
        c["records"] += 1
        c["tokens"] += tokens
        c["bytes"] += len(line)
        if (self.max_records and c["records"] >= self.max_records) or (self.max_bytes and c["bytes"] >= self.max_bytes):
            self._close_current()

    def close(self) -> list[dict]:
        if self._file is not None:
            self._close_current()
        return self.shards


def read_manifest(corpus_dir: str | os.PathLike) -> dict:
    path = Path(corpus_dir) / MANIFEST_NAME
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no corpus manifest (run `jobrunner merge` first)") from None
    if manifest.get("version") != CORPUS_VERSION:
        raise ValueError(f"{path}: corpus version {manifest.get('version')!r}, expected {CORPUS_VERSION}")
    return manifest


def shard_paths(corpus_dir: str | os.PathLike, split: str | None = None) -> list[Path]:
    """The committed shards of one split (or of both, train first), in corpus order."""
    manifest = read_manifest(corpus_dir)
    return [Path(corpus_dir) / s["name"] for s in manifest["shards"] if split is None or s["split"] == split]


def iter_corpus(corpus_dir: str | os.PathLike, split: str | None = None) -> Iterator[dict]:
    """Yield the samples of a merged corpus in their shuffled order (one split, or train then eval)."""
    for path in shard_paths(corpus_dir, split):
        with open(path, "rb") as f:
            for line in f:
                yield json.loads(line)


def iter_heads(corpus_dir: str | os.PathLike, split: str) -> Iterator[dict]:
    """Each sample's fields before its token lists (sample_id ... source_id), without parsing the lists:
    `input_ids` follows them in every line (encode_record)."""
    for path in shard_paths(corpus_dir, split):
        with open(path, "rb") as f:
            for line in f:
                yield json.loads(line[:line.index(b',"input_ids":')] + b"}")
