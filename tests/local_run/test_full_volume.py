"""A volume that fills during extraction (a small tmpfs as the data volume): the run stops saying so,
keeps every shard whole, and resumes once there is room, with every sample once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from draftgen_operator import cli
from draftgen_contracts import exit_codes
from draftgen_dev.demo_assets import write_datasets
from jobrunner.shared.corpus import iter_corpus
from jobrunner.hidden_states.store import ShardStore, read_shard_header

from .conftest import quickstart, write_spec


@pytest.fixture
def small_volume(tmp_path):
    """A 1.8 MB tmpfs: room for the generation and the corpus and one 1 MB shard of states, not two."""
    path = tmp_path / "volume"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1800k", "tmpfs", str(path)], check=True)
    yield path
    subprocess.run(["umount", str(path)], check=True)


def stored_ids(states: Path) -> list[str]:
    return [sid for shard in sorted(states.glob("shard-*.safetensors")) for sid in read_shard_header(shard)["sample_ids"]]


def test_a_volume_full_during_extraction_stops_it_saying_so_and_reruns_with_room_resume(
        small_volume, model_dir, tmp_path, capsys):
    write_datasets(small_volume / "prompts", rows_per_dataset=60)
    spec = write_spec(tmp_path / "quickstart.yaml", quickstart(budget_tokens=800))  # its export: specforge
    argv = ["run", str(spec), "--data-dir", str(small_volume), "--model-dir", str(model_dir)]
    root = small_volume / "quickstart"
    states = root / "hidden-states"

    # The states (2.9 MB) do not fit: the extraction stops before its first shard.
    assert cli.main(argv) == exit_codes.VOLUME_FULL
    err = capsys.readouterr().err
    assert "the output volume (PersistentVolumeClaim data) is full: Job quickstart-extract stopped" in err, err
    assert f"volume full at {states}" in err and "still to write: the hidden states and the specforge export" in err, err
    status = json.loads((root / "local-run" / "state.json").read_text())["status"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (status["phase"], ready["reason"]) == ("Extracting", "VolumeFull"), status
    assert not list(states.glob("*.tmp")) and not (states / "index.json").exists()  # nothing half-written
    corpus_ids = {r["sample_id"] for r in iter_corpus(root / "corpus")}

    # Room for the states, not for their export: the states are stored whole, the export stops.
    subprocess.run(["mount", "-o", "remount,size=4500k", str(small_volume)], check=True)
    assert cli.main(argv) == exit_codes.VOLUME_FULL
    err = capsys.readouterr().err
    assert "still to write: the specforge export, about" in err, err
    index = json.loads((states / "index.json").read_text())
    assert index["complete"] and set(index["samples"]) == corpus_ids == set(stored_ids(states))
    assert not (states / "exports" / "specforge.tmp").exists() and not (states / "exports" / "specforge").exists()

    # Room for everything: the extraction resumes from the stored shards and writes the export.
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_volume)], check=True)
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert f"resuming: {len(corpus_ids)} samples already" in (root / "local-run" / "extract.log").read_text()
    again = stored_ids(states)
    assert len(again) == len(set(again)) == len(corpus_ids)  # every sample once
    assert ShardStore(states, index["run"]).samples.keys() == corpus_ids
    exported = [json.loads(p.read_text()) for p in sorted((states / "exports" / "specforge").glob("*/sample_ids.json"))]
    assert sorted(sid for ids in exported for sid in ids) == sorted(corpus_ids)  # train and eval apart
    assert json.loads((root / "local-run" / "state.json").read_text())["status"]["phase"] == "Succeeded"
