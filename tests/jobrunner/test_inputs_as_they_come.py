"""Datasets as they come, end to end: generation from a shard set with fields, OpenAI batch requests
and Glaive chats against the simulator, the rows' own ids into the records and the merged corpus,
what is skipped counted by reason, the preflight's counts the same; and a shard set resumed after
SIGKILLs with no sample lost or written twice."""

from __future__ import annotations

import json
import random
import signal
import time

import pytest

from draftgen_contracts import exit_codes
from draftgen_dev.builders import generate_config
from jobrunner.shared import output
from jobrunner.merge.run import merge_corpus
from jobrunner.merge.settings import MergeSettings
from jobrunner.generate.run import run_generate
from tests.jobrunner import test_generate_crash
from tests.jobrunner.inputs_as_they_come import glaive, openai_batch, shard_set
from tests.jobrunner.test_generate import FAST_SIM, config, records
from tests.jobrunner.test_generate_crash import read_records, start, wait_for_growth

sim_url = test_generate_crash.sim_url  # the simulator in a process of its own, for the generate processes

BUDGET = 10**9  # every row


def datasets(tmp_path) -> dict[str, dict]:
    return {"math": shard_set(tmp_path / "math"), "batch": openai_batch(tmp_path / "batch.jsonl"),
            "glaive": glaive(tmp_path / "glaive-function-calling-v2.json")}


def dataset_configs(sets: dict[str, dict]) -> list[dict]:
    return [{"name": name, "path": d["path"], "budget_tokens": BUDGET, **({"fields": d["fields"]} if "fields" in d else {})}
            for name, d in sets.items()]


async def test_generation_reads_every_shape_and_carries_the_rows_own_ids(simulator, tmp_path, tokenizer_path):
    sim = simulator(profile="chat", **FAST_SIM)
    sets = datasets(tmp_path)
    assert await run_generate(config(sim, tmp_path, tokenizer_path, dataset_configs(sets))) == exit_codes.OK
    for name, d in sets.items():
        recs = records(tmp_path, name)
        assert len(recs) == len({r["row"] for r in recs}) == d["usable"], name
        assert output.read_summary(tmp_path / "out", name, 0).skipped_by_reason == d["skipped"], name
    math = {r["row"]: r for r in records(tmp_path, "math")}
    assert sorted(math) == [i for i in range(24) if i not in (5, 9)]  # the files' rows counted on, in name order
    assert math[0]["source_id"] == "q-0000" and math[23]["source_id"] == "q-0023"
    assert {r["source_id"] for r in records(tmp_path, "batch")} == {f"request-{i}" for i in range(12) if i != 3}
    assert all("source_id" not in r for r in records(tmp_path, "glaive"))  # glaive rows have no id
    # Sampling is the dataset's, whatever a request asked for.
    assert all(r["sampling_params"].get("temperature") != 0.3 for r in records(tmp_path, "batch"))
    manifest = merge_corpus(tmp_path / "out", tmp_path / "corpus", MergeSettings(eval_fraction=0.0),
                           log=lambda *_: None)
    corpus = [json.loads(line) for s in manifest["shards"] for line in (tmp_path / "corpus" / s["name"]).open()]
    by_sample = {r["sample_id"]: r.get("source_id") for r in corpus}
    assert by_sample["math/000000000"] == "q-0000" and by_sample.get("batch/000000000") == "request-0"


def test_the_preflight_counts_the_same_rows_and_what_requests_asked_for_in_vain(tmp_path, tokenizer_path):
    from draftgen_contracts.generate_config import DatasetFields
    from draftgen_contracts.prompt_classes import DEFAULT_PROMPT_CLASSES
    from jobrunner.preflight.dataset_scan import scan_dataset
    from jobrunner.shared.prompts import PromptPreparer, load_tokenizer

    preparer = PromptPreparer(load_tokenizer(tokenizer_path), {}, DEFAULT_PROMPT_CLASSES, 4096)
    for name, d in datasets(tmp_path).items():
        fields = DatasetFields(**d["fields"]) if "fields" in d else None
        found = scan_dataset(name, d["path"], preparer, 100, 10**6, fields=fields)
        assert (found.usable_rows, found.skipped_by_reason) == (d["usable"], d["skipped"]), name
        assert found.ignored_fields == d.get("ignored", {}) and found.files == (3 if name == "math" else 1)
    assert found.shapes == {"plain chat": 5, "tools + tool calls + tool results": 6}  # row 4 unconvertible


def test_a_shard_set_resumes_after_sigkills_losing_and_repeating_no_sample(tmp_path, sim_url, tokenizer_path):
    math = shard_set(tmp_path / "math", rows_per_file=60)

    def write(name: str):
        path = tmp_path / f"{name}.json"
        built = generate_config(sim_url, tmp_path / name, tokenizer_path,
                                [{"name": "d", "path": math["path"], "fields": math["fields"],
                                  "budget_tokens": BUDGET, "concurrency": 16}],
                                startup_timeout_s=20, progress_interval_s=0.3, run_id=name)
        path.write_text(json.dumps(built.to_document()))
        return path

    ref = start(write("reference"))
    assert ref.wait(timeout=120) == 0, ref.stderr.read()
    reference = read_records(tmp_path / "reference")
    assert len(reference) == math["usable"]
    config, root, rng = write("killed"), tmp_path / "killed", random.Random(3)
    part, seen = output.part_path(root, "d", 0), {}
    for _ in range(4):
        proc = start(config)
        wait_for_growth(part, part.stat().st_size if part.exists() else 0, proc)
        time.sleep(rng.uniform(0.0, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        now = read_records(root)  # it asserts no row twice
        assert all(now[row]["output_ids"] == r["output_ids"] for row, r in seen.items())
        seen = now
    last = start(config)
    assert last.wait(timeout=120) == 0, last.stderr.read()
    got = read_records(root)
    assert sorted(got) == sorted(reference)
    assert all(got[row]["output_ids"] == r["output_ids"] and got[row]["source_id"] == r["source_id"]
               for row, r in reference.items())
    skipped = output.read_summary(root, "d", 0).skipped_by_reason
    assert skipped == math["skipped"]


async def test_a_file_after_the_last_is_read_on_resume_and_one_before_it_refused(simulator, tmp_path,
                                                                                 tokenizer_path):
    from jobrunner.shared.datasets import DatasetRefused

    sim = simulator(profile="chat", **FAST_SIM)
    math = shard_set(tmp_path / "math")
    cfg = config(sim, tmp_path, tokenizer_path, dataset_configs({"math": math}))
    assert await run_generate(cfg) == exit_codes.OK
    next_shard = tmp_path / "math" / "train-00003-of-00003.jsonl"
    next_shard.write_text("".join(json.dumps({"problem": f"extra {i}", "uuid": f"x-{i}"}) + "\n" for i in range(3)))
    assert await run_generate(cfg) == exit_codes.OK
    recs = {r["row"]: r["source_id"] for r in records(tmp_path, "math")}
    assert len(recs) == math["usable"] + 3 and [recs[i] for i in (24, 25, 26)] == ["x-0", "x-1", "x-2"]
    (tmp_path / "math" / "train-00000-of-00003b.jsonl").write_text(json.dumps({"problem": "late"}) + "\n")
    with pytest.raises(DatasetRefused, match="train-00000-of-00003b.jsonl comes before train-00001-of-00003.json"):
        await run_generate(cfg)
