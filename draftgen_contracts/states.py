"""The states a dataset, the pipeline and a DatasetGeneration can be in.

String enums: a member is its own name as a string, so it compares, serializes and prints as the
value the API and the progress documents carry.
"""

from __future__ import annotations

from enum import StrEnum


class DatasetState(StrEnum):
    PENDING = "Pending"
    GENERATING = "Generating"
    BUDGET_MET = "BudgetMet"  # budget met, sample cap reached, or stopped because the total met it
    EXHAUSTED = "Exhausted"  # every row used, the budget still short
    FAILED = "Failed"


# A dataset in one of these needs no more responses: its generation may end.
DATASET_DONE = frozenset({DatasetState.BUDGET_MET, DatasetState.EXHAUSTED})


class Stage(StrEnum):
    """Where the pipeline stands: Preflight -> Generating -> Merging -> Extracting (when enabled) -> Done."""
    PREFLIGHT = "Preflight"
    GENERATING = "Generating"
    MERGING = "Merging"
    EXTRACTING = "Extracting"
    DONE = "Done"


class Phase(StrEnum):
    """What a DatasetGeneration shows: the stage, or Suspended/Failed over it."""
    PENDING = "Pending"
    GENERATING = "Generating"
    MERGING = "Merging"
    EXTRACTING = "Extracting"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"


class Component(StrEnum):
    """The kinds of Job a DatasetGeneration runs, one per stage that does work."""
    PREFLIGHT = "preflight"
    GENERATE = "generate"
    MERGE = "merge"
    EXTRACT = "extract"

