"""A decided Job as a process on this machine: its main container's command, environment and
mounts as the Job says, with this machine's paths.

What the process gets otherwise than the pod, all of it here (docs/local-run.md#what-a-local-run-changes):
- `jobrunner` is this interpreter's `python -m jobrunner.cli` (there is no image to run); a command
  that runs `-m jobrunner` with another image's Python (the SGLang extraction) runs that Python as
  the spec names it, importing this jobrunner (PYTHONPATH) instead of its init container's copy;
- a path under one of the container's mounts is the same path under the local folder that stands
  for the volume: the folder the user names for a claim (by where the pod mounts it), one folder
  per ConfigMap and per Secret (the executor writes their keys there: the run's server keys are made
  afresh by each `draftgen run`), one per emptyDir; /dev is this machine's;
- the pod's IP is 127.0.0.1;
- the generation pod's server sidecar, when it is jobrunner's simulator, runs as given on a free
  port (`--port 0`: two runs on one machine would want the same one); any other server is not run
  (draftgen.local.server);
- per component (the executor's, since they need what only it knows): generate's `--server-url`
  is the local server's, and generate serves no metrics port (for the same reason); the
  transformers extraction runs where --extract-device says.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from draftgen.env_vars import expand_vars

from .paths import JOBRUNNER, JOBRUNNER_ROOT, local_path

POD_IP_HERE = "127.0.0.1"
MACHINE_MOUNTS = ("/dev/",)  # /dev/shm and the like: this machine's own


class NotRunnableHere(ValueError):
    """The Job asks for something a local process has nothing to stand for."""


@dataclass(frozen=True)
class PodProcess:
    argv: list[str]
    env: dict[str, str]  # the container's variables, on top of this process's environment

    def with_option(self, flag: str, value: str) -> PodProcess:
        """`flag value` in place of the argv's (added when it has none)."""
        rest = self.without_option(flag).argv
        return PodProcess([*rest, flag, value], self.env)

    def without_option(self, flag: str) -> PodProcess:
        argv = list(self.argv)
        while flag in argv:
            i = argv.index(flag)
            del argv[i:i + 2]
        return PodProcess(argv, self.env)


def main_container(job: dict) -> dict:
    return job["spec"]["template"]["spec"]["containers"][0]


def server_sidecar(job: dict) -> dict | None:
    """The generation pod's server: its native sidecar (an init container that keeps running)."""
    pod = job["spec"]["template"]["spec"]
    return next((c for c in pod.get("initContainers", []) if c.get("restartPolicy") == "Always"), None)


def config_map_folder(volumes_dir: Path, name: str) -> Path:
    """Where a ConfigMap's keys are files here, as a configMap volume shows them in a pod."""
    return volumes_dir / "configmaps" / name


def secret_folder(volumes_dir: Path, name: str) -> Path:
    """Where a Secret's keys are files here (the executor writes the run's keys there, mode 0600)."""
    return volumes_dir / "secrets" / name


def container_env(container: dict, volumes_dir: Path) -> dict[str, str]:
    """The container's `env`, values expanded in order as the kubelet expands them."""
    env: dict[str, str] = {}
    for var in container.get("env") or []:
        source = var.get("valueFrom")
        secret = (source or {}).get("secretKeyRef")
        if source is None:
            env[var["name"]] = expand_vars(var.get("value", ""), env)
        elif (source.get("fieldRef") or {}).get("fieldPath") == "status.podIP":
            env[var["name"]] = POD_IP_HERE
        elif secret and (secret_folder(volumes_dir, secret["name"]) / secret["key"]).is_file():
            env[var["name"]] = (secret_folder(volumes_dir, secret["name"]) / secret["key"]).read_text()
        else:
            raise NotRunnableHere(f"container {container['name']}: env {var['name']} comes from {source}, "
                                  "which has nothing to stand for it here")
    return env


def container_mounts(job: dict, container: dict, folders: dict[str, Path], volumes_dir: Path) -> dict[str, Path]:
    """Each mount path of one of the Job's containers -> the local folder that stands for its volume."""
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"].get("volumes", [])}
    mounts: dict[str, Path] = {}
    for mount in container.get("volumeMounts", []):
        path, volume = mount["mountPath"], volumes[mount["name"]]
        if path.startswith(MACHINE_MOUNTS):
            continue
        if "configMap" in volume:
            mounts[path] = config_map_folder(volumes_dir, volume["configMap"]["name"])
        elif "secret" in volume:
            mounts[path] = secret_folder(volumes_dir, volume["secret"]["secretName"])
        elif "emptyDir" in volume:
            mounts[path] = volumes_dir / "emptydirs" / job["metadata"]["name"] / mount["name"]
        elif "persistentVolumeClaim" in volume and path in folders:
            mounts[path] = folders[path]
        elif "hostPath" in volume:  # a folder of the node: here, of this machine
            mounts[path] = Path(volume["hostPath"]["path"])
        else:
            raise NotRunnableHere(f"volume {mount['name']} mounted at {path}: no local folder stands for it "
                                  f"(the local folders are for {sorted(folders)})")
    return mounts


def pod_process(job: dict, folders: dict[str, Path], volumes_dir: Path, container: dict | None = None) -> PodProcess:
    """One of the Job's containers (its main one by default) as a local command: variables expanded,
    paths mapped, emptyDirs made."""
    container = container or main_container(job)
    env = container_env(container, volumes_dir)
    mounts = container_mounts(job, container, folders, volumes_dir)
    for folder in mounts.values():
        if folder.is_relative_to(volumes_dir / "emptydirs"):
            folder.mkdir(parents=True, exist_ok=True)
    argv = [expand_vars(a, env) for a in [*container["command"], *(container.get("args") or [])]]
    if argv[0] == "jobrunner":
        return PodProcess([*JOBRUNNER, *(local_path(a, mounts) for a in argv[1:])], env)
    start = jobrunner_module_at(argv)
    if start is None:
        raise NotRunnableHere(f"container {container['name']} runs {argv[0]!r}: only jobrunner's commands run here")
    # Another image's Python running jobrunner (the SGLang extraction): here, that interpreter as the
    # spec names it, importing this jobrunner, as the pod imports the copy its init container made.
    return PodProcess([*argv[:start], *(local_path(a, mounts) for a in argv[start:])],
                      {**env, "PYTHONPATH": str(JOBRUNNER_ROOT)})


def jobrunner_module_at(argv: list[str]) -> int | None:
    """Where `-m jobrunner` starts in a command run by some Python, or None."""
    return next((i for i in range(len(argv) - 1) if argv[i:i + 2] == ["-m", "jobrunner"]), None)


def with_device(process: PodProcess, device: str) -> PodProcess:
    """Extraction on `device` (a torch device, or "auto": spread over this machine's GPUs) instead of
    the pod's placement."""
    placed = process.without_option("--device-map").without_option("--device")
    return placed.with_option("--device-map", "auto") if device == "auto" else placed.with_option("--device", device)
