"""A dataset's files: folders, globs and shard sets in name order, formats by their first bytes, and
the record that refuses a set changed in a way that would move row indexes."""

import json

import pytest

from jobrunner.shared.dataset_files import (DatasetRefused, dataset_files, files_outside, record_file_set,
                                     resolves_outside, sniff_format)


def touch(path, text="{}\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_folder_counts_its_dataset_files_in_name_order(tmp_path):
    data = tmp_path / "data"
    shards = [touch(data / f"train-{i:05d}-of-00003.parquet") for i in (2, 0, 1)]
    for other in ("README.md", ".gitattributes", ".hidden.jsonl", "notes.txt"):
        touch(data / other)
    touch(data / "nested" / "more.jsonl")  # a folder's own files only
    assert dataset_files(data) == sorted(shards)
    assert dataset_files(f"{data}/train-*.parquet") == sorted(shards)
    assert dataset_files(shards[0]) == [shards[0]]


def test_no_file_is_refused_naming_the_path(tmp_path):
    touch(tmp_path / "empty" / "README.md")
    for path in (tmp_path / "empty", f"{tmp_path}/empty/*.jsonl", tmp_path / "gone.jsonl"):
        with pytest.raises(DatasetRefused) as refused:
            dataset_files(path)
        assert refused.value.path == str(path)


def test_a_path_is_outside_when_its_symlinks_lead_out_of_every_root(tmp_path):
    volume, elsewhere = tmp_path / "data", tmp_path / "secrets"
    (volume / "prompts").mkdir(parents=True)
    elsewhere.mkdir()
    (elsewhere / "token").write_text("{}")
    (volume / "prompts" / "ok.jsonl").write_text("{}")
    (volume / "prompts" / "link.jsonl").symlink_to(elsewhere / "token")
    (volume / "prompts" / "inner.jsonl").symlink_to(volume / "prompts" / "ok.jsonl")
    roots = [str(volume), str(tmp_path / "models")]
    assert resolves_outside(volume / "prompts" / "ok.jsonl", roots) is None
    assert resolves_outside(volume / "prompts" / "inner.jsonl", roots) is None
    assert resolves_outside(volume / "prompts" / "link.jsonl", roots) == str(elsewhere / "token")
    assert resolves_outside(volume / "prompts" / "link.jsonl", []) is None  # no roots: anywhere
    (tmp_path / "mounted").symlink_to(volume)  # a root that is itself a link is where it leads
    assert resolves_outside(volume / "prompts" / "ok.jsonl", [str(tmp_path / "mounted")]) is None


def test_every_file_of_a_set_must_be_in_the_volumes(tmp_path):
    volume, secret = tmp_path / "data", touch(tmp_path / "secret.jsonl")
    touch(volume / "a.jsonl")
    (volume / "b.jsonl").symlink_to(secret)
    assert files_outside(volume, [str(volume)]) == [(volume / "b.jsonl", str(secret))]
    assert files_outside(f"{volume}/a*", [str(volume)]) == []


def test_the_format_is_what_the_first_bytes_say_whatever_the_extension(tmp_path):
    assert sniff_format(touch(tmp_path / "rows.json", '\ufeff\n  [{"prompt": "a"}]')) == "json"
    assert sniff_format(touch(tmp_path / "rows.json", '{"prompt": "a"}\n')) == "jsonl"
    assert sniff_format(touch(tmp_path / "lies.jsonl", "PAR1....")) == "parquet"
    assert sniff_format(touch(tmp_path / "empty.jsonl", "")) == "jsonl"
    assert sniff_format(tmp_path / "lies.jsonl", "jsonl") == "jsonl"  # a declared format is taken as it is


def test_files_added_after_the_last_are_appended_anything_else_is_refused(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    touch(data / "train-00000.jsonl", "{}\n{}\n")
    touch(data / "train-00001.jsonl", "{}\n")
    assert len(record_file_set(data, out)) == 2
    touch(data / "train-00001.jsonl", "{}\n{}\n")  # the last file grew
    touch(data / "train-00002.jsonl")  # the next shard
    assert len(record_file_set(data, out)) == 3
    assert [f["name"] for f in json.loads((out / "inputs.json").read_text())["files"]] == [
        "train-00000.jsonl", "train-00001.jsonl", "train-00002.jsonl"]
    touch(data / "train-00000a.jsonl")
    with pytest.raises(DatasetRefused, match="train-00000a.jsonl comes before train-00001.jsonl"):
        record_file_set(data, out)
    (data / "train-00000a.jsonl").unlink()
    touch(data / "train-00000.jsonl", "{}\n")
    with pytest.raises(DatasetRefused, match="train-00000.jsonl changed size from 6 to 3 bytes"):
        record_file_set(data, out)
    touch(data / "train-00000.jsonl", "{}\n{}\n")
    (data / "train-00002.jsonl").unlink()
    with pytest.raises(DatasetRefused, match="train-00002.jsonl .read before. is gone"):
        record_file_set(f"{data}/train-*.jsonl", out)
