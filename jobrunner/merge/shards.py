"""Pass 2: each bucket sorted by content key (the shuffle), deduplicated, split and written as shards;
then the manifest, committed last."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from jobrunner.shared import corpus, vocabulary
from jobrunner.shared.atomic import write_json_atomically
from jobrunner.merge.decisions import is_eval
from jobrunner.merge.settings import MergeSettings
from jobrunner.merge.tally import DatasetTally


def sort_bucket(path: Path, dedupe: bool):
    """Pass 2 for one bucket: yield (header fields, corpus line) in key order, duplicates removed."""
    with open(path, "rb") as f:
        lines = f.readlines()
    lines.sort()
    previous_key = None
    for i, line in enumerate(lines):
        lines[i] = None  # release each line once handed on: the bucket's memory drains as it is written
        fields_ = line.split(b"\t", 7)
        key = fields_[0]
        duplicate = key == previous_key
        previous_key = key
        yield fields_, duplicate and dedupe


def write_shards(bucket_paths: list[Path], corpus_dir: Path, settings: MergeSettings,
                 tallies: dict[str, DatasetTally], counts: vocabulary.TokenTally) -> tuple[list[dict], dict]:
    """Pass 2: each bucket sorted by content key (the shuffle), deduplicated, split and sharded; a
    train duplicate's tokens are taken back out of `counts` (pass 1 counted every train record)."""
    writers = {split: corpus.ShardWriter(corpus_dir, split, settings.shard_records, settings.shard_bytes)
               for split in corpus.SPLITS}
    split_totals = {split: {"samples": 0, "tokens": 0} for split in corpus.SPLITS}
    for path in bucket_paths:
        for head, duplicate in sort_bucket(path, settings.dedupe):
            _, sid, dataset, plen, rlen, truncated, finish, line = head
            tally = tallies[dataset.decode()]
            plen, rlen = int(plen), int(rlen)
            split = "eval" if is_eval(sid.decode(), settings.seed, settings.eval_fraction) else "train"
            if duplicate:
                tally.duplicates += 1
                if split == "train":  # rare: parsing its line costs nothing the shuffle would notice
                    counts.remove(json.loads(line)["input_ids"][plen:])
                continue
            writers[split].write(line, plen + rlen)
            split_totals[split]["samples"] += 1
            split_totals[split]["tokens"] += plen + rlen
            tally.add_sample(plen, rlen, truncated == b"1", finish.decode())
        path.unlink()
    return writers["train"].close() + writers["eval"].close(), split_totals


def manifest_of(settings: MergeSettings, inputs: list[dict], tallies: dict[str, DatasetTally], split_totals: dict,
                shards: list[dict]) -> dict:
    return {
        "version": corpus.CORPUS_VERSION,
        "policies": settings.policies(),
        "inputs": inputs,
        "datasets": {name: tallies[name].to_json() for name in sorted(tallies)},
        "splits": split_totals,
        "samples": sum(t["samples"] for t in split_totals.values()),
        "tokens": sum(t["tokens"] for t in split_totals.values()),
        "shards": shards,
    }


def commit(corpus_dir: Path, manifest: dict, work: Path) -> None:
    """The manifest last, by rename: a reader sees the old corpus or the new one, whole."""
    write_json_atomically(corpus_dir / corpus.MANIFEST_NAME, manifest)
    remove_stale_shards(corpus_dir, {s["name"] for s in manifest["shards"]})
    shutil.rmtree(work, ignore_errors=True)


def remove_stale_shards(corpus_dir: Path, keep: set[str]) -> None:
    """Shards of an earlier merge that the new manifest does not list (it may have had more)."""
    for split in corpus.SPLITS:
        for p in corpus_dir.glob(f"{split}-*.jsonl*"):
            if p.name not in keep:
                p.unlink()
