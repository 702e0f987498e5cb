"""Progress between a generate process and whoever coordinates it (docs/contracts.md).

The protocol is three calls: a replica `publish`es its durable per-dataset totals, and reads back
the datasets someone else declared done (`stopped_datasets`) and the tokens the other replicas
have produced for each dataset (`tokens_elsewhere`), so replicas sharing one budget stop together.

`FileCoordinator` implements it with atomic JSON files in one directory (the local runner, tests);
the Kubernetes implementation (a report object per replica, the DatasetGeneration's status) lives
with the operator.

A progress document (`publish`'s argument) looks like:

    {"replica": 0, "replicas": 2, "updated_at": 1700000000.0, "finished": false,
     "datasets": {"<name>": {"state": "Generating", "completion_tokens": 123, "samples": 4,
                             "skipped": 1, "truncated": 0, "budget_tokens": 10000,
                             "tokens_per_second": 812.5}}}
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Protocol

from jobrunner.atomic import write_json_atomically


class Coordinator(Protocol):
    def publish(self, progress: dict) -> None:
        """Publish this replica's progress; every total in it must already be durable."""

    def stopped_datasets(self) -> set[str]:
        """Datasets declared done elsewhere (e.g. the shared budget was met over all replicas)."""

    def tokens_elsewhere(self) -> dict[str, int]:
        """Per dataset, the completion tokens the other replicas have published."""


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class FileCoordinator:
    """`progress-rNNN.json` per replica and one `stopped.json` (a list of dataset names) in `directory`."""

    def __init__(self, directory: str | os.PathLike, replica: int):
        self.directory = Path(directory)
        self.replica = replica
        self.directory.mkdir(parents=True, exist_ok=True)

    def progress_path(self, replica: int) -> Path:
        return self.directory / f"progress-r{replica:03d}.json"

    def publish(self, progress: dict) -> None:
        write_json_atomically(self.progress_path(self.replica), progress, indent=None)

    def stopped_datasets(self) -> set[str]:
        stopped = _read_json(self.directory / "stopped.json")
        return set(stopped) if isinstance(stopped, list) else set()

    def declare_stopped(self, datasets: set[str]) -> None:
        """Add datasets to the stopped set (the coordinator's side: the local runner, tests)."""
        write_json_atomically(self.directory / "stopped.json", sorted(self.stopped_datasets() | set(datasets)), indent=None)

    def all_progress(self) -> dict[int, dict]:
        """Every replica's last published progress, by replica index."""
        found = {}
        for path in sorted(self.directory.glob("progress-r*.json")):
            progress = _read_json(path)
            if isinstance(progress, dict):
                found[int(path.name[10:13])] = progress
        return found

    def tokens_elsewhere(self) -> dict[str, int]:
        return tokens_by_dataset(p for r, p in self.all_progress().items() if r != self.replica)


def tokens_by_dataset(progress_documents) -> dict[str, int]:
    """Sum of the published completion tokens per dataset over some replicas' progress documents."""
    totals: dict[str, int] = {}
    for progress in progress_documents:
        for name, d in (progress.get("datasets") or {}).items():
            totals[name] = totals.get(name, 0) + int(d.get("completion_tokens", 0))
    return totals
