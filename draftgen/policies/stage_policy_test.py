import pytest

from draftgen.policies.stage_policy import next_stage

DONE = dict(generation_done=True, merge_succeeded=True, extract_succeeded=True, extraction_enabled=True)


def test_generation_moves_on_only_when_every_dataset_is_done():
    assert next_stage("Generating", **{**DONE, "generation_done": False}) == "Generating"
    assert next_stage("Generating", **DONE) == "Merging"


def test_merge_then_extraction_when_enabled():
    assert next_stage("Merging", **{**DONE, "merge_succeeded": False}) == "Merging"
    assert next_stage("Merging", **DONE) == "Extracting"
    assert next_stage("Merging", **{**DONE, "extraction_enabled": False}) == "Done"
    assert next_stage("Extracting", **{**DONE, "extract_succeeded": False}) == "Extracting"
    assert next_stage("Extracting", **DONE) == "Done"


@pytest.mark.parametrize("stage", ["Merging", "Extracting", "Done"])
def test_a_raised_budget_reopens_generation_from_any_later_stage(stage):
    assert next_stage(stage, **{**DONE, "generation_done": False}) == "Generating"


def test_extraction_enabled_after_done_runs_it():
    assert next_stage("Done", **{**DONE, "extract_succeeded": False}) == "Extracting"
    assert next_stage("Done", **DONE) == "Done"
