from draftgen.api import DatasetGenerationStatus
from draftgen.local.state import RunState, StateFile, next_generation
from draftgen_contracts.states import Component, Phase, Stage
from draftgen_dev.builders import JobBuilder


def test_the_state_survives_a_round_trip(tmp_path):
    state = RunState(3, "abc", DatasetGenerationStatus(phase=Phase.MERGING, stage=Stage.MERGING),
                     {"x-merge": JobBuilder("x-merge", Component.MERGE).config_hash("h").succeeded().state()})
    StateFile(tmp_path / "state.json").save(state)
    assert StateFile(tmp_path / "state.json").load() == state


def test_an_unchanged_state_is_not_written_again(tmp_path):
    state_file = StateFile(tmp_path / "state.json")
    state_file.save(RunState(1, "abc"))
    before = (tmp_path / "state.json").stat().st_mtime_ns
    reloaded = StateFile(tmp_path / "state.json")
    reloaded.save(reloaded.load())
    assert (tmp_path / "state.json").stat().st_mtime_ns == before


def test_no_state_or_an_unreadable_one_starts_afresh(tmp_path):
    assert StateFile(tmp_path / "none.json").load() == RunState()
    (tmp_path / "bad.json").write_text("{not json")
    assert StateFile(tmp_path / "bad.json").load() == RunState()


def test_a_rerun_observes_a_new_generation_only_when_the_spec_changed_or_the_run_failed():
    done = RunState(2, "abc", DatasetGenerationStatus(phase=Phase.SUCCEEDED))
    assert next_generation(RunState(), "abc") == 1
    assert next_generation(done, "abc") == 2
    assert next_generation(done, "def") == 3
    assert next_generation(RunState(2, "abc", DatasetGenerationStatus(phase=Phase.FAILED)), "abc") == 3
