"""`jobrunner merge`: records, policies, dedupe, shuffle, split, shards, manifest, determinism."""

from __future__ import annotations

import json

import pytest

from jobrunner.shared import corpus
from jobrunner.merge.run import merge_corpus
from jobrunner.merge.settings import MergeSettings
from jobrunner.merge.cli import target_vocab_size
from jobrunner.merge import decisions
from jobrunner.cli import main as cli_main
from jobrunner.shared.output import part_path
from tests.corpus.conftest import generation_record, synthetic_generation, write_generation


def run_merge(root, out=None, **kw) -> tuple[dict, list[dict]]:
    out = out or root / "corpus"
    manifest = merge_corpus(root, out, MergeSettings(**kw), log=lambda *_: None)
    return manifest, list(corpus.iter_corpus(out))


def shard_bytes(corpus_dir) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(corpus_dir.iterdir()) if p.is_file()}


# --- decisions -------------------------------------------------------------------------------------

@pytest.mark.parametrize("policy, finish, expected", [
    ("keep", "length", (True, False)), ("drop", "length", (False, False)), ("mark", "length", (True, True)),
    ("keep", "stop", (True, False)), ("drop", "stop", (True, False)), ("mark", "stop", (True, False)),
])
def test_truncation_outcome(policy, finish, expected):
    assert decisions.truncation_outcome(finish, policy) == expected


def test_record_problem_reasons():
    good = generation_record("d", 1, [1, 2], [3])
    assert decisions.record_problem(good) is None
    assert decisions.record_problem({**good, "completion_tokens": 2}) == "completion_tokens_mismatch"
    assert decisions.record_problem({**good, "prompt_tokens": 5}) == "prompt_tokens_mismatch"
    assert decisions.record_problem({**good, "output_ids": [], "completion_tokens": 0}) == "empty_response"
    assert decisions.record_problem({**good, "output_ids": "abc", "completion_tokens": 3}) == "malformed_ids"
    assert decisions.token_arrays([1, 2], [1.5]) is None and decisions.token_arrays([1], ["7"]) is None
    assert decisions.token_arrays([1, 2], [3])[0].tolist() == [1, 2]
    assert decisions.record_problem({**good, "finish_reason": "abort"}) == "bad_finish_reason"
    assert decisions.record_problem({k: v for k, v in good.items() if k != "input_ids"}) == "missing_field"
    assert decisions.record_problem([1, 2]) == "missing_field"


def test_bucket_ranges_keep_key_order():
    keys = sorted(bytes([i, 255 - i]) + b"\0" * 14 for i in range(256))
    for n in (1, 3, 16, 1000):
        assert [decisions.bucket_of(k, n) for k in keys] == sorted(decisions.bucket_of(k, n) for k in keys)
        assert all(0 <= decisions.bucket_of(k, n) < n for k in keys)


def test_buckets_needed_grows_with_input_and_refuses_too_many():
    assert decisions.buckets_needed(1000, 512) == 1
    assert decisions.buckets_needed(2 << 30, 512) == 24
    with pytest.raises(ValueError, match="memory-limit"):
        decisions.buckets_needed(1 << 40, 64)


def test_split_fraction_is_close_and_follows_the_seed():
    # The same in every process: tests/test_determinism.py.
    ids = [f"d/{i:09d}" for i in range(20000)]
    share = sum(decisions.is_eval(s, 7, 0.1) for s in ids) / len(ids)
    assert 0.09 < share < 0.11
    assert not any(decisions.is_eval(s, 7, 0.0) for s in ids)
    assert [decisions.is_eval(s, 1, 0.5) for s in ids[:200]] != [decisions.is_eval(s, 2, 0.5) for s in ids[:200]]


# --- the corpus ------------------------------------------------------------------------------------

def test_encoded_line_is_canonical_json():
    line = corpus.encode_record("d/000000001", "d", "[1,2]", "[3]", 2, 1, "length", True, True)
    assert json.loads(line) == {"sample_id": "d/000000001", "dataset": "d", "prompt_len": 2, "finish_reason": "length",
                                "truncated": True, "cut_at_budget": True, "input_ids": [1, 2, 3],
                                "loss_mask": [0, 0, 1]}
    assert line == (json.dumps(json.loads(line), separators=(",", ":")) + "\n").encode()


def test_records_carry_whole_sequence_and_mask(gen_root):
    by_dataset = synthetic_generation(gen_root.parent / "again")  # the same records as gen_root holds
    _, records = run_merge(gen_root, truncated="keep", eval_fraction=0.0)
    source = {r["sample_id"]: r for rs in by_dataset.values() for r in rs}
    assert len(records) == len(source) and any(r["cut_at_budget"] for r in records)
    for r in records:
        g = source[r["sample_id"]]
        assert r["input_ids"] == g["input_ids"] + g["output_ids"]
        assert r["loss_mask"] == [0] * len(g["input_ids"]) + [1] * len(g["output_ids"])
        assert r["prompt_len"] == len(g["input_ids"])
        assert r["cut_at_budget"] is bool(g.get("cut_at_budget"))  # kept: a trainer may leave them out
        assert r["dataset"] == g["dataset"] and r["finish_reason"] == g["finish_reason"]
        assert r["truncated"] is False


def test_shuffle_is_a_permutation_and_seeded(gen_root):
    _, a = run_merge(gen_root, eval_fraction=0.0, seed=1)
    _, b = run_merge(gen_root, out=gen_root / "c2", eval_fraction=0.0, seed=2)
    ids_a, ids_b = [r["sample_id"] for r in a], [r["sample_id"] for r in b]
    assert sorted(ids_a) == sorted(ids_b) and len(set(ids_a)) == len(ids_a) == 120
    assert ids_a != ids_b
    assert ids_a != sorted(ids_a)


def test_truncation_policies(gen_root):
    m_keep, keep = run_merge(gen_root, truncated="keep", eval_fraction=0.0)
    m_drop, drop = run_merge(gen_root, out=gen_root / "d", truncated="drop", eval_fraction=0.0)
    m_mark, mark = run_merge(gen_root, out=gen_root / "m", truncated="mark", eval_fraction=0.0)
    n_length = sum(r["finish_reason"] == "length" for r in keep)
    assert n_length == 2 * 9  # rows 3, 10, ..., 59 of each dataset
    assert len(drop) == len(keep) - n_length and all(r["finish_reason"] == "stop" for r in drop)
    assert m_drop["datasets"]["code"]["dropped_truncated"] == 9
    assert [r["sample_id"] for r in mark] == [r["sample_id"] for r in keep]
    assert all(r["truncated"] == (r["finish_reason"] == "length") for r in mark)
    assert not any(r["truncated"] for r in keep)
    assert m_mark["datasets"]["math"]["truncated_in_corpus"] == 9


def test_dedupe_by_token_content_keeps_smallest_id(tmp_path):
    root = tmp_path / "out"
    same = ([5, 6, 7], [8, 9])
    write_generation(root, {
        ("a", 0): [generation_record("a", 4, *same), generation_record("a", 5, [5, 6], [7, 8, 9])],
        ("a", 1): [generation_record("a", 2, *same)],
        ("b", 0): [generation_record("b", 0, *same), generation_record("b", 1, [1], [2])],
    })
    manifest, records = run_merge(root, eval_fraction=0.0)
    # [5,6]+[7,8,9] has the same concatenation but another prompt/response boundary: not a duplicate.
    assert sorted(r["sample_id"] for r in records) == ["a/000000002", "a/000000005", "b/000000001"]
    assert manifest["datasets"]["a"]["duplicates_removed"] == 1
    assert manifest["datasets"]["b"]["duplicates_removed"] == 1
    _, kept_all = run_merge(root, out=tmp_path / "nd", eval_fraction=0.0, dedupe=False)
    assert len(kept_all) == 5


def test_split_ratio_and_disjoint(tmp_path):
    root = tmp_path / "out"
    synthetic_generation(root, datasets=("x",), rows=2000, replicas=1)
    manifest, _ = run_merge(root, eval_fraction=0.2, shard_records=300)
    train = [r["sample_id"] for r in corpus.iter_corpus(root / "corpus", "train")]
    ev = [r["sample_id"] for r in corpus.iter_corpus(root / "corpus", "eval")]
    assert not set(train) & set(ev) and len(train) + len(ev) == 2000
    assert 0.17 < len(ev) / 2000 < 0.23
    assert manifest["splits"]["eval"]["samples"] == len(ev)
    assert all(decisions.is_eval(s, 0, 0.2) for s in ev)


def test_shards_by_records_and_by_bytes(gen_root):
    m, records = run_merge(gen_root, eval_fraction=0.0, shard_records=25, shard_bytes=None)
    assert [s["records"] for s in m["shards"]] == [25, 25, 25, 25, 20]
    m2, records2 = run_merge(gen_root, out=gen_root / "b", eval_fraction=0.0, shard_records=None, shard_bytes=4000)
    assert len(m2["shards"]) > 2 and all(s["bytes"] < 4000 + 1000 for s in m2["shards"])
    assert records2 == records  # sharding changes files, not the corpus


def test_manifest_checksums_and_counts(gen_root):
    m, records = run_merge(gen_root, eval_fraction=0.1, shard_records=40)
    out = gen_root / "corpus"
    for s in m["shards"]:
        assert corpus.sha256_file(out / s["name"]) == s["sha256"]
        assert sum(1 for _ in open(out / s["name"], "rb")) == s["records"]
    for i in m["inputs"]:
        assert corpus.sha256_file(gen_root / i["path"]) == i["sha256"]
    assert len(m["inputs"]) == 4 and sum(i["records_read"] for i in m["inputs"]) == 120
    assert m["samples"] == len(records) == sum(d["samples"] for d in m["datasets"].values())
    assert m["tokens"] == sum(len(r["input_ids"]) for r in records)
    code = m["datasets"]["code"]
    assert code["tokens"] == code["prompt_tokens"] + code["response_tokens"]
    assert code["lengths"]["response"]["count"] == code["samples"]
    assert m["policies"] == {"truncated": "mark", "dedupe": True, "seed": 0, "eval_fraction": 0.1,
                             "shard_records": 40, "shard_bytes": 1 << 30, "draft_vocab_size": 32000}


def test_rerun_is_byte_identical_and_independent_of_memory_limit(gen_root, tmp_path, monkeypatch):
    run_merge(gen_root, shard_records=30)
    first = shard_bytes(gen_root / "corpus")
    run_merge(gen_root, shard_records=30)
    assert shard_bytes(gen_root / "corpus") == first
    # Many buckets (a tiny memory limit would need them on a big corpus) give the same bytes.
    monkeypatch.setattr("jobrunner.merge.run.buckets_needed", lambda *_: 37)
    merge_corpus(gen_root, tmp_path / "many", MergeSettings(shard_records=30), log=lambda *_: None)
    assert shard_bytes(tmp_path / "many") == first


def test_rerun_with_fewer_shards_removes_stale_ones(gen_root):
    run_merge(gen_root, eval_fraction=0.0, shard_records=10)
    m, _ = run_merge(gen_root, eval_fraction=0.0, shard_records=100)
    assert sorted(p.name for p in (gen_root / "corpus").glob("*.jsonl")) == sorted(s["name"] for s in m["shards"])


def test_bad_records_and_torn_tail_are_counted_not_fatal(tmp_path):
    root = tmp_path / "out"
    write_generation(root, {("d", 0): [generation_record("d", 0, [1], [2]), generation_record("d", 1, [1], [3])]})
    path = part_path(root, "d", 0)
    bad = generation_record("d", 2, [1], [4])
    bad["completion_tokens"] = 7
    with open(path, "ab") as f:
        f.write((json.dumps(bad) + "\n").encode())
        f.write(b'{"sample_id": "d/000000003", "dataset"')  # torn tail: ignored by the reader
    m, records = run_merge(root, eval_fraction=0.0)
    assert len(records) == 2
    assert m["datasets"]["d"]["skipped_by_reason"] == {"completion_tokens_mismatch": 1}
    with open(path, "r+b") as f:  # cut the torn tail, as the writer would on resume
        f.truncate(len(f.read().rsplit(b"\n", 1)[0]) + 1)
    with open(path, "ab") as f:
        for bad_ids in ([2.5], [True], [1e20]):
            f.write((json.dumps(generation_record("d", 5, [1], bad_ids)) + "\n").encode())
    m, records = run_merge(root, eval_fraction=0.0)
    assert len(records) == 2 and m["datasets"]["d"]["skipped_by_reason"]["malformed_ids"] == 3
    with open(path, "ab") as f:  # whole lines of JSON that are no objects: bad rows, counted, not a crash
        f.write(b'[1, 2]\n"a string"\n7\nnull\n')
    m, records = run_merge(root, eval_fraction=0.0)
    assert len(records) == 2 and m["datasets"]["d"]["skipped_by_reason"]["missing_field"] == 4
    with open(path, "ab") as f:
        f.write(b'garbled\n' + (json.dumps(generation_record("d", 9, [1], [9])) + "\n").encode())
    m, records = run_merge(root, eval_fraction=0.0)
    assert len(records) == 2 and m["datasets"]["d"]["skipped_by_reason"]["unparseable_line"] == 1
    assert m["inputs"][0]["stopped_at_unparseable_line"]


def test_cli_config_file_and_overrides(gen_root, tmp_path, capsys):
    cfg = tmp_path / "merge.yaml"
    cfg.write_text("truncated: drop\nseed: 3\neval_fraction: 0.0\nshard_records: 50\n")
    assert cli_main(["merge", "--output-root", str(gen_root), "--config", str(cfg), "--seed", "4"]) == 0
    m = corpus.read_manifest(gen_root / "corpus")
    assert m["policies"]["truncated"] == "drop" and m["policies"]["seed"] == 4 and m["policies"]["shard_records"] == 50
    assert cli_main(["merge", "--output-root", str(gen_root), "--export", "speculators-jsonl"]) == 0
    assert (gen_root / "corpus" / "exports" / "speculators-jsonl" / "train.jsonl").stat().st_size > 0
    cfg.write_text("trunctated: drop\n")
    assert cli_main(["merge", "--output-root", str(gen_root), "--config", str(cfg)]) == 2
    assert "unknown settings" in capsys.readouterr().err
    assert cli_main(["merge", "--output-root", str(tmp_path / "nothing")]) == 2


def test_the_draft_vocabulary_counts_every_trainable_train_token_once(gen_root):
    """Counted in pass 1, duplicates taken back in pass 2: exactly the response tokens of the train
    split as the corpus holds it; the maps follow the counts."""
    import numpy as np

    synthetic_generation(gen_root, datasets=("dup",), rows=20, seed=0)  # a third dataset...
    synthetic_generation(gen_root / "copy", datasets=("dup",), rows=20, seed=0)
    for part in (gen_root / "copy" / "generate" / "dup").glob("part-*"):  # ...written twice: duplicates
        part.rename(gen_root / "generate" / "dup" / part.name.replace("part-r", "part-r9"))
    manifest = merge_corpus(gen_root, gen_root / "corpus", MergeSettings(eval_fraction=0.2, draft_vocab_size=16),
                           log=lambda *_: None, target_vocab_size=1000)
    assert manifest["datasets"]["dup"]["duplicates_removed"] > 0
    want: dict[int, int] = {}
    for r in corpus.iter_corpus(gen_root / "corpus", "train"):
        for t, m in zip(r["input_ids"], r["loss_mask"]):
            if m:
                want[t] = want.get(t, 0) + 1
    counted = json.loads((gen_root / "corpus" / "vocab" / "token_freq.json").read_text())
    assert {int(t): n for t, n in counted["counts"].items()} == want and counted["tokens"] == sum(want.values())
    d2t = np.load(gen_root / "corpus" / "vocab" / "d2t-16.npy")
    t2d = np.load(gen_root / "corpus" / "vocab" / "t2d-16.npy")
    chosen = sorted(want, key=lambda t: (-want[t], t))[:16]
    assert sorted(d2t + np.arange(16)) == sorted(chosen) and set(np.flatnonzero(t2d)) == set(chosen)
    files = {f["name"] for f in manifest["vocabulary"]["files"]}
    assert {"vocab/token_freq.json", "vocab/d2t-16.npy", "vocab/t2d-16.npy"} == files  # no torch in a merge


def test_a_model_folder_without_a_readable_config_leaves_the_maps_out_and_the_corpus_merged(gen_root, tmp_path,
                                                                                           capsys):
    (tmp_path / "model").mkdir()
    assert target_vocab_size(str(tmp_path / "model")) is None
    assert "no draft vocabulary maps" in capsys.readouterr().err
    manifest = merge_corpus(gen_root, gen_root / "corpus", MergeSettings(), log=lambda *_: None)
    assert manifest["samples"] and "no target vocabulary size" in manifest["vocabulary"]["note"]
    assert [f["name"] for f in manifest["vocabulary"]["files"]] == ["vocab/token_freq.json"]


def test_the_heads_are_the_lines_without_their_token_lists(gen_root):
    run_merge(gen_root)
    for split in corpus.SPLITS:
        heads = list(corpus.iter_heads(gen_root / "corpus", split))
        assert heads == [{k: v for k, v in r.items() if k not in ("input_ids", "loss_mask")}
                         for r in corpus.iter_corpus(gen_root / "corpus", split)]
