"""Progress between a generate process and whoever coordinates it (docs/contracts.md).

The protocol: a replica `publish`es its durable per-dataset totals (a `ProgressDocument`), and
reads back the datasets someone else declared done (`stopped_datasets`), the other replicas' last
reports per dataset (`peers`: their tokens, and whether they settled, for the budget sharing of
draftgen_contracts.budget_shares), and, once at start, its own last report before this process
(`previous_own`: a restarted replica keeps its predecessor's word).

`FileCoordinator` implements it with atomic JSON files in one directory (the local runner, tests);
`jobrunner.shared.coordination_kube.KubeCoordinator` with the replica's report ConfigMap and the
DatasetGeneration's status (the pods).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Protocol

from draftgen_contracts import names
from draftgen_contracts.progress import DatasetProgress, ProgressDocument, parse_progress
from jobrunner.shared.atomic import write_bytes_atomically, write_json_atomically


class Coordinator(Protocol):
    def publish(self, progress: ProgressDocument) -> None:
        """Publish this replica's progress; every total in it must already be durable."""

    def stopped_datasets(self) -> set[str]:
        """Datasets declared done elsewhere (e.g. the shared budget was met over all replicas)."""

    def peers(self) -> dict[str, dict[int, DatasetProgress]]:
        """Per dataset, the other replicas' last published progress, by replica index."""

    def previous_own(self) -> ProgressDocument | None:
        """This replica's last published progress from before this process, if any."""

    def own_now(self) -> ProgressDocument | None:
        """This replica's report as it is now (written by whichever process runs the replica), if any."""


def peers_of(replica: int, documents: dict[int, ProgressDocument]) -> dict[str, dict[int, DatasetProgress]]:
    """Per dataset, every other replica's entry in its document."""
    found: dict[str, dict[int, DatasetProgress]] = {}
    for r, document in documents.items():
        if r != replica:
            for name, entry in document.datasets.items():
                found.setdefault(name, {})[r] = entry
    return found


class FileCoordinator:
    """`progress-rNNN.json` per replica and one `stopped.json` (a list of dataset names) in `directory`."""

    def __init__(self, directory: str | os.PathLike, replica: int):
        self.directory = Path(directory)
        self.replica = replica
        self.directory.mkdir(parents=True, exist_ok=True)
        self._previous = parse_progress(_read_bytes(self.progress_path(replica)))

    def progress_path(self, replica: int) -> Path:
        return self.directory / names.progress_file_name(replica)

    def publish(self, progress: ProgressDocument) -> None:
        write_bytes_atomically(self.progress_path(self.replica), progress.to_json().encode())

    def stopped_datasets(self) -> set[str]:
        try:
            stopped = json.loads((self.directory / "stopped.json").read_text())
        except (OSError, ValueError):
            return set()
        return set(stopped) if isinstance(stopped, list) else set()

    def declare_stopped(self, datasets: set[str]) -> None:
        """Add datasets to the stopped set (the coordinator's side: tests)."""
        write_json_atomically(self.directory / "stopped.json", sorted(self.stopped_datasets() | set(datasets)), indent=None)

    def all_progress(self) -> dict[int, ProgressDocument]:
        """Every replica's last published progress, by replica index; unreadable files are left out."""
        found = {}
        for path in sorted(self.directory.iterdir()):
            replica = names.replica_of_progress_file(path.name)
            document = parse_progress(_read_bytes(path)) if replica is not None else None
            if document is not None:
                found[replica] = document
        return found

    def peers(self) -> dict[str, dict[int, DatasetProgress]]:
        return peers_of(self.replica, self.all_progress())

    def previous_own(self) -> ProgressDocument | None:
        return self._previous

    def own_now(self) -> ProgressDocument | None:
        return parse_progress(_read_bytes(self.progress_path(self.replica)))


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None
