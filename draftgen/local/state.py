"""What a rerun of `draftgen run` continues from: the status and the Jobs that completed.

In a cluster the API server keeps both (the object's status, the completed Jobs); here they are
one JSON file under the output root, written atomically after every change. A Job that was still
running when the run stopped is not kept: the next run creates it again, as a Job controller
replaces a lost pod, and it resumes from the stored output.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from draftgen.api import DatasetGenerationSpec, DatasetGenerationStatus
from draftgen.observed import JobState
from draftgen_contracts.states import Phase
from jobrunner.shared.atomic import write_json_atomically
from jobrunner.shared.full_volume import is_full_volume

STATE_FILE = "state.json"


@dataclass
class RunState:
    generation: int = 0  # as metadata.generation: the spec's version this status observed
    spec_digest: str = ""
    status: DatasetGenerationStatus = field(default_factory=DatasetGenerationStatus)
    completed_jobs: dict[str, JobState] = field(default_factory=dict)
    spec: dict = field(default_factory=dict)  # the spec it ran (as applied): what an update is held to


def spec_digest(spec: DatasetGenerationSpec) -> str:
    return hashlib.sha256(spec.model_dump_json(by_alias=True).encode()).hexdigest()[:16]


def next_generation(previous: RunState, digest: str) -> int:
    """The generation this run observes: a new one when the spec changed, and when the last run
    failed (running again after a failure is re-applying the object: the failure is not sticky)."""
    if previous.generation and previous.spec_digest == digest and previous.status.phase != Phase.FAILED:
        return previous.generation
    return previous.generation + 1


class StateFile:
    """state.json, written only when it changed, as the operator patches a status only when it changed."""

    def __init__(self, path: Path):
        self.path = path
        self.written: dict | None = None  # what the file holds

    def load(self) -> RunState:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return RunState()
        self.written = data
        return RunState(generation=int(data.get("generation", 0)), spec_digest=str(data.get("spec_digest", "")),
                        status=DatasetGenerationStatus.model_validate(data.get("status") or {}),
                        completed_jobs={n: JobState(**j) for n, j in (data.get("completed_jobs") or {}).items()},
                        spec=data.get("spec") or {})

    def save(self, state: RunState) -> None:
        data = {"generation": state.generation, "spec_digest": state.spec_digest,
                "status": state.status.model_dump(by_alias=True, mode="json"),
                "completed_jobs": {n: dataclasses.asdict(j) for n, j in state.completed_jobs.items()},
                "spec": state.spec}
        if data != self.written:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                write_json_atomically(self.path, data)
            except OSError as e:
                # The state lives on the output volume: full, the last state written stays (whole) and
                # this one is written at the next save that finds room; the run goes on.
                if not is_full_volume(e):
                    raise
                return
            self.written = data
