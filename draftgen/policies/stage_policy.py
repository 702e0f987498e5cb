"""Stage policy: where does the pipeline go from its current stage, given what has finished?

    Generating -> Merging -> Extracting (when enabled) -> Done

Level-based: generation that is no longer done (a budget was raised) sends any later stage back to
Generating, and each call moves at most one stage, so a restarted operator simply continues.
"""

from __future__ import annotations

from typing import Literal

Stage = Literal["Generating", "Merging", "Extracting", "Done"]


def next_stage(stage: Stage, *, generation_done: bool, merge_succeeded: bool, extract_succeeded: bool,
               extraction_enabled: bool) -> Stage:
    if not generation_done:
        return "Generating"
    if stage == "Generating":
        return "Merging"
    if stage == "Merging" and merge_succeeded:
        return "Extracting" if extraction_enabled else "Done"
    if stage == "Extracting" and extract_succeeded:
        return "Done"
    if stage == "Done" and extraction_enabled and not extract_succeeded:
        return "Extracting"  # extraction enabled after the fact
    return stage
