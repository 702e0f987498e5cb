"""Where the pods' paths are on this machine: each pod mount stands for a local folder."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from draftgen import api
from draftgen_contracts import names

JOBRUNNER = [sys.executable, "-m", "jobrunner.cli"]
# The folder jobrunner is imported from here: what another Python puts on its path to run it.
JOBRUNNER_ROOT = Path(importlib.util.find_spec("jobrunner").origin).parents[1]


def pod_mounts(spec: api.DatasetGenerationSpec, data_dir: Path, model_dir: Path,
               inputs_dir: Path | None = None) -> dict[str, Path]:
    """Where the pods mount the run's volume claims -> the local folder the user names for each."""
    mounts = {names.DATA_MOUNT: data_dir, spec.model.mount_path.rstrip("/") or "/": model_dir}
    if spec.inputs:
        if inputs_dir is None:
            raise ValueError("spec.inputs names a volume of prompt files: give its folder with --inputs-dir")
        mounts[spec.inputs.mount_path.rstrip("/")] = inputs_dir
    return mounts


def local_path(pod_path: str, mounts: dict[str, Path]) -> str:
    """A path as the pods see it, on this machine: under a mount (the longest that matches) -> under
    its local folder; any other path is used as it is."""
    for mount in sorted(mounts, key=len, reverse=True):
        if pod_path == mount or pod_path.startswith(mount.rstrip("/") + "/"):
            return str(mounts[mount] / pod_path[len(mount):].lstrip("/"))
    return pod_path
