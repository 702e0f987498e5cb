import pytest

from draftgen.policies.stage_policy import next_stage, stage_event
from draftgen.reasons import Reason
from draftgen_contracts.states import Stage

DONE = dict(generation_done=True, merge_succeeded=True, extract_succeeded=True, extraction_enabled=True)


@pytest.mark.parametrize("stage, changed, following", [
    (Stage.PREFLIGHT, {}, Stage.PREFLIGHT),  # waits for its preflight, whatever else is done
    (Stage.PREFLIGHT, {"preflight_succeeded": True, "generation_done": False}, Stage.GENERATING),
    (Stage.GENERATING, {"generation_done": False}, Stage.GENERATING),  # moves on only when every dataset is done
    (Stage.GENERATING, {}, Stage.MERGING),
    (Stage.MERGING, {"merge_succeeded": False}, Stage.MERGING),
    (Stage.MERGING, {}, Stage.EXTRACTING),
    (Stage.MERGING, {"extraction_enabled": False}, Stage.DONE),
    (Stage.EXTRACTING, {"extract_succeeded": False}, Stage.EXTRACTING),
    (Stage.EXTRACTING, {}, Stage.DONE),
    (Stage.MERGING, {"generation_done": False}, Stage.GENERATING),  # a raised budget reopens generation
    (Stage.EXTRACTING, {"generation_done": False}, Stage.GENERATING),
    (Stage.DONE, {"generation_done": False}, Stage.GENERATING),
    (Stage.DONE, {"extract_succeeded": False}, Stage.EXTRACTING),  # extraction enabled after the fact
    (Stage.DONE, {}, Stage.DONE),
])
def test_each_stage_moves_at_most_one_step_on_what_has_finished(stage, changed, following):
    assert next_stage(stage, **{**DONE, **changed}) == following


@pytest.mark.parametrize("before, after, reason", [
    (Stage.PREFLIGHT, Stage.PREFLIGHT, None),
    (Stage.PREFLIGHT, Stage.GENERATING, Reason.PREFLIGHT_PASSED),
    (Stage.GENERATING, Stage.MERGING, Reason.BUDGETS_MET),
    (Stage.MERGING, Stage.EXTRACTING, Reason.MERGE_SUCCEEDED),
    (Stage.MERGING, Stage.DONE, Reason.SUCCEEDED),
    (Stage.EXTRACTING, Stage.DONE, Reason.SUCCEEDED),
    (Stage.DONE, Stage.EXTRACTING, Reason.EXTRACTION_ENABLED),
    (Stage.MERGING, Stage.GENERATING, Reason.REOPENED),  # any step back
    (Stage.DONE, Stage.GENERATING, Reason.REOPENED),
])
def test_each_step_says_what_happened(before, after, reason):
    said = stage_event(before, after)
    assert (said and said.reason) == reason
