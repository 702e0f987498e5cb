import pytest

from draftgen.policies.stage_policy import next_stage

DONE = dict(generation_done=True, merge_succeeded=True, extract_succeeded=True, extraction_enabled=True)


@pytest.mark.parametrize("stage, changed, following", [
    ("Preflight", {}, "Preflight"),  # waits for its preflight, whatever else is done
    ("Preflight", {"preflight_succeeded": True, "generation_done": False}, "Generating"),
    ("Generating", {"generation_done": False}, "Generating"),  # moves on only when every dataset is done
    ("Generating", {}, "Merging"),
    ("Merging", {"merge_succeeded": False}, "Merging"),
    ("Merging", {}, "Extracting"),
    ("Merging", {"extraction_enabled": False}, "Done"),
    ("Extracting", {"extract_succeeded": False}, "Extracting"),
    ("Extracting", {}, "Done"),
    ("Merging", {"generation_done": False}, "Generating"),  # a raised budget reopens generation
    ("Extracting", {"generation_done": False}, "Generating"),
    ("Done", {"generation_done": False}, "Generating"),
    ("Done", {"extract_succeeded": False}, "Extracting"),  # extraction enabled after the fact
    ("Done", {}, "Done"),
])
def test_each_stage_moves_at_most_one_step_on_what_has_finished(stage, changed, following):
    assert next_stage(stage, **{**DONE, **changed}) == following
