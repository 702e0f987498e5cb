"""One local control plane for a whole test run, shared by the processes that run the tests
(pytest-xdist's workers): the first that needs it starts it, the others attach to it by the state
it writes, and only the process that started none of the tests' work (xdist's controller, or the
one process of a run without workers) stops it, once every test has ended.

Most tests share it: each works in namespaces of its own. A few change what every other test
sees (the CRD replaced by an older version, a cluster-wide webhook that every Job goes through)
and take it alone. `ClusterTurns` says whose turn it is, with two file locks (flock, so a process
that dies lets go of its turn): any number of shared turns together, or one alone. A test waiting
to be alone takes the gate first, so the shared turns asked for after it wait behind it rather
than keep it out for as long as they keep coming.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .controlplane import LocalCluster

STATE = "state.json"


def shared_cluster(folder: Path, start: Callable[[Path], LocalCluster]) -> LocalCluster:
    """The control plane in `folder`: attached where another process started it, else `start(folder)`.
    A start lock keeps two processes from starting two."""
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder / "start.lock", fcntl.LOCK_EX):
        if (folder / STATE).exists():
            return LocalCluster.attach(folder)
        return start(folder)


def stop_shared_cluster(folder: Path) -> LocalCluster | None:
    """Stop the control plane some process started in `folder`; None where none was started."""
    if not (folder / STATE).exists():
        return None
    cluster = LocalCluster.attach(folder)
    cluster.stop()
    return cluster


class ClusterTurns:
    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.gate, self.use = folder / "gate.lock", folder / "use.lock"

    @contextmanager
    def shared(self) -> Iterator[None]:
        with locked(self.gate, fcntl.LOCK_SH):
            use = _lock(self.use, fcntl.LOCK_SH)
        try:
            yield
        finally:
            use.close()

    @contextmanager
    def alone(self) -> Iterator[None]:
        with locked(self.gate, fcntl.LOCK_EX), locked(self.use, fcntl.LOCK_EX):
            yield


def _lock(path: Path, how: int):
    handle = open(path, "a")
    fcntl.flock(handle, how)  # closing the file lets go
    return handle


@contextmanager
def locked(path: Path, how: int = fcntl.LOCK_EX) -> Iterator[None]:
    handle = _lock(path, how)
    try:
        yield
    finally:
        handle.close()
