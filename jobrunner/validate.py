"""`jobrunner validate --corpus C [--states O]`: check a corpus and its hidden states before training.

Checks, each counted over what it looked at:
- corpus shards: every shard the manifest lists exists with its sha256 and record count;
- corpus samples: ids and loss mask of equal length, the mask 0 on the prompt and 1 on exactly the
  generated tokens, no sample id twice;
- states, every sample once: each sample of `index.json` is in exactly one shard (the shard headers
  are read, not trusted from the index), and every corpus sample is there unless counted skipped;
- states, ids and lengths: each stored sample holds the corpus sample's ids and loss mask (cut at the
  run's max_len as extraction cuts them) and states of its length, hidden size and aux layers;
- states, finite: no NaN or Inf in any state (fp8 states dequantized first).

It prints one table row per check and the first problems found, and exits 1 on any problem.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from draftgen_contracts import exit_codes, names
from jobrunner.shared import corpus
from jobrunner.hidden_states import selection

SHOWN_PROBLEMS = 20


@dataclass
class Check:
    name: str
    checked: int = 0
    problems: list[str] = field(default_factory=list)

    def count(self, problem: str | None) -> None:
        self.checked += 1
        if problem:
            self.problems.append(problem)


def mask_problem(record: dict) -> str | None:
    """What is wrong with a corpus sample's loss mask; None when it covers exactly the generated tokens."""
    ids, mask, prompt = record["input_ids"], record["loss_mask"], record["prompt_len"]
    if len(ids) != len(mask):
        return f"{len(ids)} ids but a loss mask of {len(mask)}"
    if mask != corpus.loss_mask(prompt, len(ids) - prompt):
        wrong = next(i for i, (m, w) in enumerate(zip(mask, corpus.loss_mask(prompt, len(ids) - prompt))) if m != w)
        return (f"loss mask {mask[wrong]} at position {wrong}: it must be 0 on the {prompt} prompt tokens "
                f"and 1 on the {len(ids) - prompt} generated ones")
    return None


def stored_problem(record: dict, stored: dict, run: dict) -> str | None:
    """What a stored sample gets wrong against its corpus sample and the run's settings; None if nothing."""
    action, length = selection.length_action(len(record["input_ids"]), record["prompt_len"], run.get("max_len"),
                                        run.get("too_long", "truncate"))
    if action == "skip":
        return f"stored, but extraction skips it ({length})"
    ids, mask = stored["input_ids"].tolist(), stored["loss_mask"].tolist()
    if len(ids) != length:
        return f"{len(ids)} tokens stored, the corpus sample has {length} to store"
    if ids != record["input_ids"][:length]:
        at = next(i for i, (a, b) in enumerate(zip(ids, record["input_ids"])) if a != b)
        return f"token id {ids[at]} at position {at}, the corpus has {record['input_ids'][at]}"
    if mask != record["loss_mask"][:length]:
        return "the loss mask differs from the corpus's"
    aux, final = stored["aux_hidden_states"], stored["final_hidden_state"]
    want_aux = (length, len(run["aux_layers"]), run["hidden_size"])
    if tuple(aux.shape) != want_aux or tuple(final.shape) != (length, run["hidden_size"]):
        return f"states of shape {tuple(aux.shape)} and {tuple(final.shape)}, expected {want_aux} and " \
               f"{(length, run['hidden_size'])}"
    return None


def finite_problem(stored: dict) -> str | None:
    import torch

    for name in ("aux_hidden_states", "final_hidden_state"):
        bad = ~torch.isfinite(stored[name].float())
        if bad.any():
            return f"{int(bad.sum())} non-finite values in {name} (first at token {int(bad.nonzero()[0][0])})"
    return None


def once_problems(shard_samples: dict[str, list[str]], index: dict, corpus_ids: set[str]) -> list[str]:
    """Samples in no shard or in two, samples the index and the shards disagree on, and corpus samples
    neither stored nor counted as skipped."""
    seen = Counter(sid for ids in shard_samples.values() for sid in ids)
    problems = [f"{sid}: in {n} shards" for sid, n in sorted(seen.items()) if n > 1]
    problems += [f"{sid}: in index.json but in no shard" for sid in sorted(set(index["samples"]) - set(seen))]
    problems += [f"{sid}: in a shard but not in index.json" for sid in sorted(set(seen) - set(index["samples"]))]
    problems += [f"{sid}: stored but not in the corpus" for sid in sorted(set(seen) - corpus_ids)]
    missing = len(corpus_ids - set(seen))
    skipped = sum(index.get("skipped", {}).values())
    if missing != skipped:
        problems.append(f"{missing} corpus samples not stored, but index.json counts {skipped} skipped")
    return problems


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


def table(checks: list[Check]) -> list[str]:
    width = max(len(c.name) for c in checks)
    lines = [f"{'check':<{width}}  {'checked':>8}  {'problems':>8}"]
    lines += [f"{c.name:<{width}}  {c.checked:>8}  {len(c.problems):>8}" for c in checks]
    shown = [p for c in checks for p in c.problems][:SHOWN_PROBLEMS]
    total = sum(len(c.problems) for c in checks)
    lines += [f"  {p}" for p in shown] + ([f"  ... and {total - len(shown)} more"] if total > len(shown) else [])
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", required=True, type=Path, help="a merged corpus directory (jobrunner merge)")
    parser.add_argument("--states", type=Path, help="its extracted hidden states (jobrunner extract --out)")


def main(args: argparse.Namespace) -> int:
    checks = validate(args.corpus, args.states)
    print("\n".join(table(checks)))
    bad = any(c.problems for c in checks)
    print("validate: " + ("problems found" if bad else "no problem found"))
    return exit_codes.FAILED if bad else exit_codes.OK
