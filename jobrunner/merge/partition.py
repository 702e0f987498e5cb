"""Pass 1: every generation record checked, put through the truncation policy, encoded as its corpus
line and written to the bucket that owns its content key."""

from __future__ import annotations

import json
from pathlib import Path

from draftgen_contracts.generation_record import GenerationRecord
from jobrunner.shared import corpus, vocabulary
from jobrunner.merge.decisions import bucket_of, content_key, is_eval, record_problem, token_arrays, truncation_outcome
from jobrunner.merge.settings import MergeSettings
from jobrunner.merge.tally import DatasetTally
from jobrunner.shared.output import iter_records


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
            is_object = isinstance(rec, dict)  # a line of JSON that is no object is a bad row too
            dataset = rec.get("dataset") if is_object and isinstance(rec.get("dataset"), str) else path.parent.name
            tally = tallies.setdefault(dataset, DatasetTally())
            tally.input_records += 1
            tally.from_traces += is_object and rec.get("source") == "trace"
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
