"""The pods' paths and commands on this machine: the pods' mounts map to local folders."""

from __future__ import annotations

import sys
from pathlib import Path

from draftgen import api
from draftgen_contracts import names

JOBRUNNER = [sys.executable, "-m", "jobrunner.cli"]


def pod_mounts(spec: api.DatasetGenerationSpec, data_dir: Path, model_dir: Path) -> dict[str, Path]:
    """What the pods mount where -> the local folder that stands for it."""
    return {names.DATA_MOUNT: data_dir, spec.model.mount_path.rstrip("/") or "/": model_dir}


def local_path(pod_path: str, mounts: dict[str, Path]) -> str:
    """A path as the pods see it, on this machine: under a mount (the longest that matches) -> under
    its local folder; any other path is used as it is."""
    for mount in sorted(mounts, key=len, reverse=True):
        if pod_path == mount or pod_path.startswith(mount.rstrip("/") + "/"):
            return str(mounts[mount] / pod_path[len(mount):].lstrip("/"))
    return pod_path


def local_argv(pod_command: list[str], mounts: dict[str, Path]) -> list[str]:
    """A pod's `jobrunner ...` command line for this machine: this interpreter, local paths."""
    if pod_command[0] != "jobrunner":
        raise ValueError(f"not a jobrunner command: {pod_command}")
    return [*JOBRUNNER, *(local_path(a, mounts) if a.startswith("/") else a for a in pod_command[1:])]


def extract_placement(device: str) -> list[str]:
    """Where the extraction puts the model here: a torch device, or "auto" (transformers spreads the
    model over the GPUs), instead of the extraction pod's placement."""
    return ["--device-map", "auto"] if device == "auto" else ["--device", device]
