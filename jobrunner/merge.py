"""`jobrunner merge`: every dataset's generation output -> one deduplicated, shuffled, split, sharded corpus.

Two streaming passes, so memory is bounded by the bucket size whatever the corpus size:

1. Partition. Each generation record (read with `jobrunner.output.iter_records`) is validated, put
   through the truncated-response policy, encoded as its corpus line and given a key: a seeded
   128-bit BLAKE2b of its token content (prompt ids + response ids). The line goes to the bucket file
   that owns the key's range (bucket = top 64 bits * B >> 64), with the key in front.
2. Sort. Each bucket is read into memory, its lines sorted (key, then sample id), exact duplicates
   (equal keys) dropped but the first, and the lines streamed out to the train or eval shards.

Why one key does three jobs. Sorting by a keyed hash is a seeded uniform shuffle; because buckets are
key *ranges*, sorting each bucket and concatenating them is the global sort, so the output is
independent of the bucket count (that is, of the memory limit); and equal contents have equal keys,
so duplicates meet in one bucket, next to each other: dedupe costs no memory of its own (no global
hash set, which in Python would cost ~90 bytes per sample). The duplicate kept is the one with the
smallest sample id, whichever file it came from. A false duplicate needs a 128-bit collision
(probability ~n^2 / 2^129: never, at any corpus size).

The train/eval split is decided per sample by a seeded hash of its sample id, so a sample stays on
its side when other samples are added or removed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import sys
from array import array
from collections import Counter
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from draftgen_contracts import exit_codes, names, provenance
from draftgen_contracts.generation_record import FINISH_REASONS, GenerationRecord
from draftgen_contracts.length_stats import length_stats
from jobrunner import corpus, vocabulary
from jobrunner.atomic import write_json_atomically
from jobrunner.full_volume import full_at, ran_out_of_room, say_on_stderr
from jobrunner.output import iter_records, record_files
from jobrunner.preflight.model_facts import model_facts
from jobrunner.preflight.problem import PreflightProblem

TRUNCATED_POLICIES = ("keep", "drop", "mark")
# Bucket files are written all at once; past this many open files, ask for more memory instead.
MAX_BUCKETS = 1024
# A bucket in memory (the lines, Python's per-line overhead, the sort) takes ~1.3x its file size;
# a quarter of the limit per bucket leaves room for the interpreter, buffers and the stats.
BUCKET_SHARE_OF_MEMORY = 4
# Corpus lines are larger than the generation lines they come from (the mask adds ~2 bytes per token).
CORPUS_BYTES_PER_INPUT_BYTE = 1.5


@dataclass(frozen=True)
class MergeSettings:
    truncated: str = "mark"
    dedupe: bool = True
    seed: int = 0
    eval_fraction: float = 0.01
    shard_records: int | None = 100_000
    shard_bytes: int | None = 1 << 30
    memory_limit_mb: int = 512
    # The EAGLE-3 draft vocabulary (jobrunner/vocabulary.py): SpecForge's and speculators' default size
    # (specforge 0.2.0 algorithms/eagle3/providers.py; speculators 0.9.0 convert/eagle/eagle3_converter.py).
    draft_vocab_size: int = 32000

    def check(self) -> None:
        if self.truncated not in TRUNCATED_POLICIES:
            raise ValueError(f"truncated policy {self.truncated!r}: expected one of {TRUNCATED_POLICIES}")
        if not 0.0 <= self.eval_fraction < 1.0:
            raise ValueError(f"eval_fraction {self.eval_fraction}: expected 0 <= f < 1")
        if not self.shard_records and not self.shard_bytes:
            raise ValueError("set shard_records or shard_bytes (or both)")
        if self.memory_limit_mb < 64:
            raise ValueError(f"memory_limit_mb {self.memory_limit_mb}: at least 64 is needed")
        if self.draft_vocab_size < 0:
            raise ValueError(f"draft_vocab_size {self.draft_vocab_size}: expected >= 0 (0: no maps)")

    def policies(self) -> dict:
        """What determines the output (the memory limit does not: see the module docstring)."""
        return {k: v for k, v in asdict(self).items() if k != "memory_limit_mb"}


# --- decisions -------------------------------------------------------------------------------------


def truncation_outcome(finish_reason: str, policy: str) -> tuple[bool, bool]:
    """(keep the sample?, its `truncated` flag) for a response under the truncated-response policy.

    `keep` keeps cut-off responses as if complete (flag false; `finish_reason` still says "length"),
    `drop` removes them, `mark` keeps them flagged so a trainer can filter or weight them."""
    if finish_reason != "length":
        return True, False
    return policy != "drop", policy == "mark"


def record_problem(rec: dict) -> str | None:
    """Why a generation record cannot enter the corpus (the reason it is counted under), or None."""
    try:
        prompt, response = rec["input_ids"], rec["output_ids"]
        sid, dataset, row = rec["sample_id"], rec["dataset"], rec["row"]
        finish, completion, prompt_tokens = rec["finish_reason"], rec["completion_tokens"], rec["prompt_tokens"]
    except (KeyError, TypeError):
        return "missing_field"
    if not isinstance(row, int) or isinstance(row, bool):
        return "bad_sample_id"
    if not isinstance(sid, str) or not isinstance(dataset, str) or any(c in sid + dataset for c in "\t\n"):
        return "bad_sample_id"
    if not isinstance(prompt, list) or not isinstance(response, list):
        return "malformed_ids"
    if not prompt:
        return "empty_prompt"
    if not response:
        return "empty_response"
    if finish not in FINISH_REASONS:
        return "bad_finish_reason"
    if completion != len(response):
        return "completion_tokens_mismatch"
    if prompt_tokens != len(prompt):
        return "prompt_tokens_mismatch"
    return None


def token_arrays(prompt_ids: list, output_ids: list) -> tuple[array, array] | None:
    """The ids as int64 arrays, or None when one is not an integer (array() checks in C, ~10x faster
    than a Python loop over the ids; it takes JSON true/false as 1/0, which the caller refuses)."""
    try:
        return array("q", prompt_ids), array("q", output_ids)
    except (TypeError, OverflowError):
        return None


def content_key(prompt: array, output: array, seed: int) -> bytes:
    """Seeded 128-bit hash of the token content; the prompt length is hashed too (a token moved
    across the prompt/response boundary makes another sample)."""
    h = hashlib.blake2b(digest_size=16, key=seed.to_bytes(8, "little", signed=True))
    h.update(len(prompt).to_bytes(8, "little"))
    h.update(prompt.tobytes())
    h.update(output.tobytes())
    return h.digest()


def bucket_of(key: bytes, buckets: int) -> int:
    """The bucket owning `key`: buckets are equal ranges of the key space, in key order."""
    return (int.from_bytes(key[:8], "big") * buckets) >> 64


def buckets_needed(input_bytes: int, memory_limit_mb: int) -> int:
    per_bucket = memory_limit_mb * (1 << 20) // BUCKET_SHARE_OF_MEMORY
    needed = max(1, math.ceil(input_bytes * CORPUS_BYTES_PER_INPUT_BYTE / per_bucket))
    if needed > MAX_BUCKETS:
        raise ValueError(f"{input_bytes} input bytes need {needed} buckets at {memory_limit_mb} MB; "
                         f"at most {MAX_BUCKETS} are allowed: raise --memory-limit-mb")
    return needed


def is_eval(sample_id: str, seed: int, eval_fraction: float) -> bool:
    """Whether a sample belongs to the eval split: a seeded hash of its id, below the fraction."""
    h = hashlib.blake2b(sample_id.encode(), digest_size=8, key=b"split" + seed.to_bytes(8, "little", signed=True))
    return int.from_bytes(h.digest(), "big") < eval_fraction * 2**64


# --- the two passes --------------------------------------------------------------------------------


class DatasetTally:
    def __init__(self) -> None:
        self.input_records = 0
        self.from_traces = 0  # input records that were existing traces (kind traces), not generated
        self.skipped: Counter = Counter()
        self.dropped_truncated = 0
        self.duplicates = 0
        self.samples = 0
        self.tokens = 0
        self.truncated_in_corpus = 0
        self.finish_reasons: Counter = Counter()
        self.prompt_lengths: Counter = Counter()
        self.response_lengths: Counter = Counter()
        self.total_lengths: Counter = Counter()

    def add_sample(self, prompt_len: int, response_len: int, truncated: bool, finish_reason: str) -> None:
        self.samples += 1
        self.tokens += prompt_len + response_len
        self.truncated_in_corpus += truncated
        self.finish_reasons[finish_reason] += 1
        self.prompt_lengths[prompt_len] += 1
        self.response_lengths[response_len] += 1
        self.total_lengths[prompt_len + response_len] += 1

    def to_json(self) -> dict:
        return {
            "input_records": self.input_records, "from_traces": self.from_traces, "skipped_by_reason": dict(sorted(self.skipped.items())),
            "dropped_truncated": self.dropped_truncated, "duplicates_removed": self.duplicates,
            "samples": self.samples, "tokens": self.tokens,
            "prompt_tokens": sum(l * c for l, c in self.prompt_lengths.items()),
            "response_tokens": sum(l * c for l, c in self.response_lengths.items()),
            "truncated_in_corpus": self.truncated_in_corpus,
            "finish_reasons": dict(sorted(self.finish_reasons.items())),
            "lengths": {"prompt": length_stats(self.prompt_lengths).to_json(),
                        "response": length_stats(self.response_lengths).to_json(),
                        "total": length_stats(self.total_lengths).to_json()},
        }


def partition(files: list[Path], output_root: Path, bucket_paths: list[Path], settings: MergeSettings,
              tallies: dict[str, DatasetTally], counts: vocabulary.TokenTally) -> list[dict]:
    """Pass 1: every record to its bucket, its trainable tokens counted when it is a train sample
    (`counts`; pass 2 takes the duplicates' back). Returns the input files' descriptions for the manifest."""
    bucket_files = [open(p, "wb", buffering=1 << 18) for p in bucket_paths]
    try:
        return [partition_file(path, output_root, bucket_files, settings, tallies, counts) for path in files]
    finally:
        for f in bucket_files:
            f.close()


def partition_file(path: Path, output_root: Path, bucket_files: list, settings: MergeSettings,
                   tallies: dict[str, DatasetTally], counts: vocabulary.TokenTally) -> dict:
    """One part file's records to their buckets; its description for the manifest."""
    buckets = len(bucket_files)
    records = unreadable = 0
    try:
        for rec in iter_records(path):
            records += 1
            problem = record_problem(rec)
            dataset = rec.get("dataset") if isinstance(rec, dict) and isinstance(rec.get("dataset"), str) else path.parent.name
            tally = tallies.setdefault(dataset, DatasetTally())
            tally.input_records += 1
            tally.from_traces += rec.get("source") == "trace"
            if problem:
                tally.skipped[problem] += 1
                continue
            record = GenerationRecord.from_json(rec)  # its fields are there: record_problem checked them
            prompt, response = record.input_ids, record.output_ids
            arrays = token_arrays(prompt, response)
            prompt_json, response_json = json.dumps(prompt, separators=(",", ":")), json.dumps(response, separators=(",", ":"))
            if arrays is None or "e" in prompt_json or "e" in response_json:  # true/false/1e9 are not token ids
                tally.skipped["malformed_ids"] += 1
                continue
            keep, truncated = truncation_outcome(record.finish_reason, settings.truncated)
            if not keep:
                tally.dropped_truncated += 1
                continue
            key = content_key(*arrays, settings.seed)
            line = corpus.encode_record(record.sample_id, dataset, prompt_json, response_json, len(prompt),
                                        len(response), record.finish_reason, truncated, record.cut_at_budget,
                                        record.source_id)
            head = (f"{key.hex()}\t{record.sample_id}\t{dataset}\t{len(prompt)}\t{len(response)}\t{int(truncated)}\t"
                    f"{record.finish_reason}\t")
            bucket_files[bucket_of(key, buckets)].write(head.encode() + line)
            if not is_eval(record.sample_id, settings.seed, settings.eval_fraction):
                counts.add(response)  # the response is what the loss mask trains on
    except (json.JSONDecodeError, UnicodeDecodeError):
        # A complete but garbled line (a node crash mid-write): the generation writer cuts the
        # file there on resume, so the merge reads the file up to it, the same records.
        unreadable = 1
        tallies.setdefault(path.parent.name, DatasetTally()).skipped["unparseable_line"] += 1
    return {"path": str(path.relative_to(output_root)), "bytes": path.stat().st_size,
            "sha256": corpus.sha256_file(path), "records_read": records,
            "stopped_at_unparseable_line": bool(unreadable)}


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


def merge(output_root: str | os.PathLike, corpus_dir: str | os.PathLike, settings: MergeSettings,
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


def generation_provenance(output_root: Path) -> dict:
    """Every generation session of every replica (draftgen_contracts.provenance), and what differs
    between them."""
    sessions = []
    for path in sorted((output_root / names.GENERATE_DIR).glob("provenance-r*.json")):
        if names.PROVENANCE_FILE.match(path.name):
            sessions += json.loads(path.read_text())["sessions"]
    sessions.sort(key=lambda s: (s["replica"], s["started_at"]))
    return {"merged_by": provenance.draftgen_version(), "sessions": sessions, "differs": provenance.what_differs(sessions)}


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


# --- command line ----------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output-root", required=True, help="the generation output root (holds generate/)")
    parser.add_argument("--corpus-dir", help="where the corpus goes (default: OUTPUT_ROOT/corpus)")
    parser.add_argument("--config", help="YAML or JSON file with merge settings (command-line options win)")
    parser.add_argument("--truncated", choices=TRUNCATED_POLICIES, help="policy for finish_reason 'length' (default mark)")
    parser.add_argument("--dedupe", action=argparse.BooleanOptionalAction, default=None,
                        help="remove exact duplicates by token content (default on)")
    parser.add_argument("--seed", type=int, help="shuffle, dedupe-hash and split seed (default 0)")
    parser.add_argument("--eval-fraction", type=float, help="share of samples in the eval split (default 0.01)")
    parser.add_argument("--shard-records", type=int, help="records per shard (default 100000; 0: no limit)")
    parser.add_argument("--shard-bytes", type=int, help="bytes per shard (default 1 GiB; 0: no limit)")
    parser.add_argument("--memory-limit-mb", type=int, help="memory the shuffle may use (default 512)")
    parser.add_argument("--export", action="append", default=None, choices=["hf-parquet", "speculators-jsonl"],
                        help="also write an export under CORPUS_DIR/exports/ (repeatable)")
    parser.add_argument("--draft-vocab-size", type=int,
                        help="the EAGLE-3 draft vocabulary's size for the d2t/t2d maps (default 32000; 0: none)")
    parser.add_argument("--model", help="the target model's folder: its config.json's vocab_size sizes the maps")


def settings_from(args: argparse.Namespace) -> tuple[MergeSettings, list[str]]:
    """Defaults, overridden by the config file, overridden by the command line."""
    values: dict = {}
    exports: list[str] = []
    if args.config:
        import yaml  # JSON is YAML too

        loaded = yaml.safe_load(Path(args.config).read_text()) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{args.config}: expected a mapping of merge settings")
        known = {f.name for f in fields(MergeSettings)}
        unknown = set(loaded) - known - {"export"}
        if unknown:
            raise ValueError(f"{args.config}: unknown settings {sorted(unknown)}; known: {sorted(known | {'export'})}")
        exports = list(loaded.pop("export", []) or [])
        values.update(loaded)
    for f in fields(MergeSettings):
        v = getattr(args, f.name, None)
        if v is not None:
            values[f.name] = v or None if f.name.startswith("shard_") else v
    if args.export is not None:
        exports = args.export
    return MergeSettings(**values), exports


def target_vocab_size(model: str | None) -> int | None:
    """The model's vocabulary size from its config.json, or None (the corpus is still merged, with the
    token counts but no draft maps: the manifest's `vocabulary.note` says why)."""
    if not model:
        return None
    try:
        return model_facts(model).vocab_size
    except PreflightProblem as e:
        print(f"jobrunner merge: no draft vocabulary maps: {e}", file=sys.stderr)
        return None


def main(args: argparse.Namespace) -> int:
    corpus_dir = Path(args.corpus_dir or Path(args.output_root) / "corpus")
    try:
        settings, exports = settings_from(args)
        merge(args.output_root, corpus_dir, settings, target_vocab_size=target_vocab_size(args.model))
        if exports:
            from jobrunner import exports as exporters

            for kind in exports:
                path = exporters.export_corpus(corpus_dir, kind)
                print(f"merge: export {kind} -> {path}")
    except (ValueError, FileNotFoundError) as e:
        print(f"jobrunner merge: error: {e}", file=sys.stderr)
        return exit_codes.BAD_CONFIG
    except Exception as e:
        if not ran_out_of_room(e, Path(args.output_root)):
            raise
        # The corpus's manifest goes last (commit): the last whole corpus and the records stay as they were.
        shutil.rmtree(corpus_dir / ".merge-work", ignore_errors=True)  # its room back
        say_on_stderr(f"jobrunner merge: {full_at(Path(args.output_root))}; the merge stopped, the records untouched")
        return exit_codes.VOLUME_FULL
    return exit_codes.OK
