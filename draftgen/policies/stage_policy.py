"""Stage policy: where does the pipeline go from its current stage, given what has finished?

    Preflight -> Generating -> Merging -> Extracting (when enabled) -> Done

A new object starts at Preflight (the CPU check before any GPU); it is left once, for good.

Level-based: generation that is no longer done (a budget was raised) sends any later stage back to
Generating, and each call moves at most one stage, so a restarted operator simply continues.
"""

from __future__ import annotations

from draftgen import reasons
from draftgen.reasons import Explanation
from draftgen_contracts.states import Stage

# What each step says (a Normal event); any other is a step back to Generating.
STAGE_EVENTS = {
    (Stage.PREFLIGHT, Stage.GENERATING): reasons.PREFLIGHT_PASSED,
    (Stage.GENERATING, Stage.MERGING): reasons.GENERATION_ENDED,
    (Stage.MERGING, Stage.EXTRACTING): reasons.MERGED_FOR_EXTRACTION,
    (Stage.MERGING, Stage.DONE): reasons.MERGED_LAST,
    (Stage.EXTRACTING, Stage.DONE): reasons.EXTRACTED,
    (Stage.DONE, Stage.EXTRACTING): reasons.EXTRACTION_ENABLED,
}


def next_stage(stage: Stage, *, generation_done: bool, merge_succeeded: bool, extract_succeeded: bool,
               extraction_enabled: bool, preflight_succeeded: bool = False) -> Stage:
    if stage == Stage.PREFLIGHT:
        return Stage.GENERATING if preflight_succeeded else Stage.PREFLIGHT
    if not generation_done:
        return Stage.GENERATING
    if stage == Stage.GENERATING:
        return Stage.MERGING
    if stage == Stage.MERGING and merge_succeeded:
        return Stage.EXTRACTING if extraction_enabled else Stage.DONE
    if stage == Stage.EXTRACTING and extract_succeeded:
        return Stage.DONE
    if stage == Stage.DONE and extraction_enabled and not extract_succeeded:
        return Stage.EXTRACTING  # extraction enabled after the fact
    return Stage(stage)


def stage_event(before: Stage, after: Stage) -> Explanation | None:
    """What a step from `before` to `after` says; None when the stage stays."""
    return None if after == before else STAGE_EVENTS.get((before, after), reasons.REOPENED)
