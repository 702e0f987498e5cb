"""The checks run over a corpus and its hidden states, reading their files."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

from draftgen_contracts import names
from jobrunner.shared import corpus
from jobrunner.validate.checks import Check, finite_problem, mask_problem, once_problems, stored_problem


def validate(corpus_dir: Path, states_dir: Path | None) -> list[Check]:
    """Every check, reading the corpus and the states once each, a sample at a time (a corpus of
    100M+ tokens never sits in memory)."""
    shards, samples = Check("corpus: shards match the manifest"), Check("corpus: loss mask on the generated tokens")
    manifest = corpus.read_manifest(corpus_dir)
    seen: set[str] = set()
    for shard in manifest["shards"]:
        path = corpus_dir / shard["name"]
        if not path.exists():
            shards.count(f"{shard['name']}: missing")
            continue
        digest, lines = hashlib.sha256(), 0
        for record in corpus_records(path, digest):
            lines += 1
            problem = "sample id twice in the corpus" if record["sample_id"] in seen else mask_problem(record)
            samples.count(f"{record['sample_id']}: {problem}" if problem else None)
            seen.add(record["sample_id"])
        shards.count(f"{shard['name']}: sha256 differs from the manifest's" if digest.hexdigest() != shard["sha256"]
                     else f"{shard['name']}: {lines} records, the manifest says {shard['records']}"
                     if lines != shard["records"] else None)
    checks = [shards, samples]
    if states_dir is not None:
        checks += validate_states(states_dir, corpus_dir, manifest, seen)
    return checks


def corpus_records(path: Path, digest) -> Iterator[dict]:
    """A corpus shard's records, one line at a time, hashing the bytes as they are read."""
    with open(path, "rb") as f:
        for line in f:
            digest.update(line)
            yield json.loads(line)


def validate_states(states_dir: Path, corpus_dir: Path, manifest: dict, corpus_ids: set[str]) -> list[Check]:
    from jobrunner.hidden_states.store import INDEX_NAME, load_sample, read_shard_header

    once, match, finite = (Check("states: every sample once"), Check("states: ids and lengths match the corpus"),
                           Check("states: finite values"))
    index = json.loads((states_dir / INDEX_NAME).read_text())
    headers = {p.name: read_shard_header(p) for p in sorted(states_dir.iterdir())
               if names.parse_states_shard_name(p.name) is not None}
    once.checked, once.problems = len(index["samples"]), once_problems(
        {name: h["sample_ids"] for name, h in headers.items()}, index, corpus_ids)
    for shard in manifest["shards"]:
        path = corpus_dir / shard["name"]
        for record in (corpus_records(path, hashlib.sha256()) if path.exists() else ()):
            where = index["samples"].get(record["sample_id"])
            if where is None or where["shard"] not in headers:
                continue  # skipped, or said above
            sid, stored = record["sample_id"], load_sample(states_dir, record["sample_id"], index)
            match.count(f"{sid}: {p}" if (p := stored_problem(record, stored, index["run"])) else None)
            finite.count(f"{sid}: {p}" if (p := finite_problem(stored)) else None)
    return [once, match, finite]
