"""The merge of one output root: both passes, the draft vocabulary, the provenance, the commit."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from draftgen_contracts import names, provenance
from jobrunner.shared import vocabulary
from jobrunner.merge.decisions import buckets_needed
from jobrunner.merge.partition import partition
from jobrunner.merge.settings import MergeSettings
from jobrunner.merge.shards import commit, manifest_of, write_shards
from jobrunner.merge.tally import DatasetTally
from jobrunner.shared.output import record_files


def merge_corpus(output_root: str | os.PathLike, corpus_dir: str | os.PathLike, settings: MergeSettings,
          log=print, target_vocab_size: int | None = None) -> dict:
    """Run both passes, count the draft vocabulary, and commit the corpus (manifest last). Returns the
    manifest. `target_vocab_size` (the model's): without it, no d2t/t2d maps."""
    settings.check()
    output_root, corpus_dir = Path(output_root), Path(corpus_dir)
    files = record_files(output_root)
    if not files:
        raise FileNotFoundError(f"no generation output under {output_root}/generate/ (nothing to merge)")
    input_bytes = sum(p.stat().st_size for p in files)
    buckets = buckets_needed(input_bytes, settings.memory_limit_mb)
    work = fresh_work_dir(corpus_dir)
    log(f"merge: {len(files)} files, {input_bytes / 1e6:.1f} MB, {buckets} buckets "
        f"(memory limit {settings.memory_limit_mb} MB)")
    tallies: dict[str, DatasetTally] = {}
    bucket_paths = [work / f"bucket-{b:04d}" for b in range(buckets)]
    counts = vocabulary.TokenTally()
    inputs = partition(files, output_root, bucket_paths, settings, tallies, counts)
    shards, split_totals = write_shards(bucket_paths, corpus_dir, settings, tallies, counts)
    manifest = manifest_of(settings, inputs, tallies, split_totals, shards)
    manifest["vocabulary"] = vocabulary.write(corpus_dir, counts.counts(), settings.draft_vocab_size, target_vocab_size)
    manifest["provenance"] = generation_provenance(output_root)
    if manifest["provenance"]["differs"]:
        log(f"merge: WARNING: the generation sessions differ in {', '.join(manifest['provenance']['differs'])}: "
            f"this corpus was not made by one target (manifest.json provenance.sessions)")
    commit(corpus_dir, manifest, work)
    log(f"merge: {manifest['samples']} samples, {manifest['tokens']} tokens "
        f"(train {split_totals['train']['samples']}, eval {split_totals['eval']['samples']}) in {len(shards)} shards")
    return manifest


def fresh_work_dir(corpus_dir: Path) -> Path:
    """The buckets' folder, emptied of what an interrupted merge left."""
    work = corpus_dir / ".merge-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return work


def generation_provenance(output_root: Path) -> dict:
    """Every generation session of every replica (draftgen_contracts.provenance), and what differs
    between them."""
    sessions = []
    for path in sorted((output_root / names.GENERATE_DIR).glob("provenance-r*.json")):
        if names.PROVENANCE_FILE.match(path.name):
            sessions += json.loads(path.read_text())["sessions"]
    sessions.sort(key=lambda s: (s["replica"], s["started_at"]))
    return {"merged_by": provenance.draftgen_version(), "sessions": sessions, "differs": provenance.what_differs(sessions)}
