"""`make demo`: one DatasetGeneration end to end on a real (local) Kubernetes control plane.

It starts the control plane (two 8-GPU KWOK nodes and a CPU node), installs the CRD, starts the
operator, puts a tiny model and three prompt datasets on PersistentVolumes, applies
examples/quickstart.yaml, and shows what a user would watch: `kubectl get dsgen`, the per-dataset
budgets filling up, the generation Jobs deleted the moment the budgets are met, the merge and the
extraction, then the corpus, the hidden states and the length statistics.

The generation pods are served by the real SGLang 0.5.23 on the CPU (draftgen_dev.real_sglang):
the quickstart with only `spec.server.command`, `args` and `tensorParallelSize` changed, as a user
points it at their own server. `--server simulator` (`make demo SERVER=simulator`) applies the
quickstart as written, served by jobrunner's simulator, with no SGLang installed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import yaml
from kubernetes import client

from draftgen_dev.cluster.binaries import KUBECTL_HELM, ensure
from draftgen_dev.cluster.controlplane import LocalCluster
from draftgen_dev.cluster.waiting import crd_established, wait_until
from draftgen_dev.demo_assets import build_model, write_datasets
from draftgen_dev.demo_progress import Progress
from draftgen_dev.real_sglang.install import ensure_installed
from draftgen_dev.real_sglang.server import CPU_ARGS, CPU_ENV

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "draftgen-demo"
EXAMPLE = REPO / "examples" / "quickstart.yaml"
CRD = REPO / "crds" / "datasetgenerations.draftgen.io.yaml"


def with_real_sglang(manifest: dict) -> dict:
    """The quickstart served by the real SGLang on the CPU: its pod runs SGLang's own launcher from
    the cached venv with the CPU platform plugin selected; draftgen adds model, host and port. The
    extraction runs on SGLang too (the backend docs/eagle3.md recommends), with the same Python and flags."""
    server = manifest["spec"]["server"]
    server["command"] = ["env", *(f"{k}={v}" for k, v in CPU_ENV.items()), "PYTHONUNBUFFERED=1",
                         str(ensure_installed()), "-m", "sglang.launch_server"]
    server["args"] = list(CPU_ARGS)
    server["tensorParallelSize"] = 1  # one CPU process per pod
    manifest["spec"].setdefault("extraction", {})["backend"] = "sglang"
    return manifest


def say(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m", flush=True)


# The tiny model built by another Python: the demo's venv has no torch when the real SGLang serves
# (Makefile, DEMO_STAMP), and SGLang's venv has one.
BUILD_MODEL = "import sys; from pathlib import Path; from draftgen_dev.demo_assets import build_model; build_model(Path(sys.argv[1]))"


class Demo:
    def __init__(self, cluster: LocalCluster, workdir: Path, manifest: dict, model_python: str | None = None):
        self.cluster = cluster
        self.workdir = workdir
        self.manifest = manifest
        self.model_python = model_python  # builds the tiny model where this venv cannot (no torch)
        self.kubectl = str(ensure(KUBECTL_HELM) / "kubectl")
        self.api = cluster.api_client()

    def k(self, *args: str, check: bool = True) -> str:
        out = subprocess.run([self.kubectl, "--kubeconfig", str(self.cluster.kubeconfig), *args],
                             capture_output=True, text=True)
        if check and out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr}")
        return out.stdout

    def install(self, crd: Path = CRD, namespace: str = NAMESPACE,
                explain: str = "dsgen.spec.datasets.budgetTokens") -> None:
        say("install the CRD; `kubectl explain` teaches the API")
        self.k("apply", "-f", str(crd))
        name = yaml.safe_load(crd.read_text())["metadata"]["name"]
        wait_until(lambda: crd_established(self.api, name), 60, f"the CRD {name} to be Established")
        explained = wait_until(lambda: self.k("explain", explain, check=False).strip(), 60,
                               f"`kubectl explain {explain}` (discovery serves a new type after Established)")
        print(explained)
        self.k("create", "namespace", namespace)

    def volumes(self) -> None:
        say("volumes: a tiny model (real tokenizer + random Llama) and three prompt datasets")
        models = self.cluster.create_local_volume(NAMESPACE, "models")
        data = self.cluster.create_local_volume(NAMESPACE, "data")
        if self.model_python:
            subprocess.run([self.model_python, "-c", BUILD_MODEL, str(models / "tiny")], check=True,
                           env={**os.environ, "PYTHONPATH": str(REPO / "devtools")})
        else:
            build_model(models / "tiny")
        for name, path in write_datasets(data / "prompts").items():
            print(f"  {name:9s} {path.name:18s} {path.stat().st_size:>8,d} bytes")

    def start_operator(self, stack: ExitStack) -> None:
        say("start the operator (kopf), its pods run for real through the local kubelet")
        log = open(self.workdir / "operator.log", "ab")
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig), "DRAFTGEN_FOLD_INTERVAL": "1",
               "DRAFTGEN_EXTRA_POD_LABELS": "draftgen.io/local-kubelet=true", "DRAFTGEN_METRICS_PORT": "0"}
        proc = subprocess.Popen([sys.executable, "-m", "draftgen_operator.cli", "operator", "--namespace", NAMESPACE,
                                 "--liveness", ""], env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        stack.callback(lambda: (proc.terminate(), proc.wait(15)))
        print(f"  pid {proc.pid}, log {self.workdir / 'operator.log'}")

    def run(self, timeout_s: float = 600) -> dict:
        applied = self.workdir / EXAMPLE.name
        applied.write_text(yaml.safe_dump(self.manifest, sort_keys=False))
        server = " ".join(self.manifest["spec"]["server"]["command"][-3:])
        say(f"kubectl apply -f {EXAMPLE.relative_to(REPO)}   (server: {server})")
        print(self.k("apply", "-n", NAMESPACE, "-f", str(applied)).strip())
        custom, core = client.CustomObjectsApi(self.api), client.CoreV1Api(self.api)
        progress = Progress(sys.stdout)
        deadline, status = time.monotonic() + timeout_s, {}
        while time.monotonic() < deadline:
            status = custom.get_namespaced_custom_object("draftgen.io", "v1alpha1", NAMESPACE, "datasetgenerations",
                                                         "quickstart").get("status") or {}
            progress.show(status, core.list_namespaced_pod(NAMESPACE).items)
            if status.get("phase") in ("Succeeded", "Failed"):
                break
            time.sleep(1)
        progress.close()
        print(f"$ kubectl get dsgen -o wide\n{self.k('get', 'dsgen', '-n', NAMESPACE, '-o', 'wide', check=False)}")
        return status

    def show(self, status: dict) -> None:
        say("events")
        print(self.k("get", "events", "-n", NAMESPACE, "--field-selector", "involvedObject.kind=DatasetGeneration",
                     "--sort-by=.metadata.creationTimestamp",
                     "-o", "custom-columns=REASON:.reason,MESSAGE:.message", check=False).strip())
        say("status")
        print(yaml.safe_dump({k: status.get(k) for k in ("phase", "tokens", "budgetTokens", "progress")},
                             sort_keys=False).strip())
        estimate = status.get("estimate") or {}
        print("estimate: " + ", ".join(f"{k} {estimate.get(k)}" for k in (
            "responseTokens", "promptTokens", "corpusTokens", "hiddenStateBytes", "tokensPerSecond", "gpuHours")))
        data = self.cluster.volumes_dir / f"{NAMESPACE}-data" / "quickstart"
        manifest = data / "corpus" / "manifest.json"
        if manifest.exists():
            say(f"the corpus: {manifest.relative_to(self.cluster.state_dir)}")
            m = json.loads(manifest.read_text())
            print(f"  {'dataset':10s} {'records':>8s} {'samples':>8s} {'dupes':>6s} {'truncated':>9s} {'tokens':>8s}")
            for name, d in sorted(m["datasets"].items()):
                print(f"  {name:10s} {d['input_records']:8d} {d['samples']:8d} {d['duplicates_removed']:6d} "
                      f"{d['truncated_in_corpus']:9d} {d['tokens']:8d}")
            print("  splits: " + ", ".join(f"{k} {v['samples']} samples / {v['tokens']} tokens"
                                            for k, v in m["splits"].items()) + f"; policies {m['policies']}")
        index = data / "hidden-states" / "index.json"
        if index.exists():
            say("EAGLE-3 hidden states")
            shards = sorted((data / "hidden-states").glob("*.safetensors"))
            written = sum(s.stat().st_size for s in shards)
            made_by = json.loads(index.read_text()).get("provenance", {}).get("backend", "transformers")
            print(f"  {len(shards)} safetensors shard(s), {written:,d} bytes "
                  f"(estimated {estimate.get('hiddenStateBytes', 0):,d}), index {index}, extracted by {made_by}")
            extraction = status.get("extraction") or {}
            print(f"  status.extraction: {extraction.get('tokens', 0):,d} tokens, {extraction.get('samples', 0):,d} "
                  f"samples at {extraction.get('tokensPerSecond', 0):,.0f} tokens/s measured on this CPU")
            exports = sorted(p.name for p in (data / "corpus" / "exports").iterdir()) + sorted(
                p.name for p in (data / "hidden-states" / "exports").iterdir())
            print(f"  exports for trainers: {', '.join(exports)} (docs/formats.md)")
            say("jobrunner validate (ids, lengths, loss masks, finite values, every sample once)")
            subprocess.run([sys.executable, "-m", "jobrunner.cli", "validate", "--corpus", str(data / "corpus"),
                            "--states", str(data / "hidden-states")], check=False)
        say("length statistics (jobrunner stats)")
        budgets = [f"--budget={d['name']}={d['budgetTokens']}" for d in status.get("datasets") or []]
        subprocess.run([sys.executable, "-m", "jobrunner.cli", "stats", "--output-root", str(data),
                        "--png-dir", str(self.workdir / "stats"), *budgets], check=False)
        print(f"  overview.png (every dataset's lengths, truncation, budgets), one histogram per dataset and "
              f"stats.md in {self.workdir / 'stats'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="draftgen_dev.demo")
    parser.add_argument("--server", choices=("real", "simulator"), default="real",
                        help="what serves the generation pods: jobrunner's simulator or the real SGLang on the CPU")
    args = parser.parse_args(argv)
    manifest = yaml.safe_load(EXAMPLE.read_text())
    if args.server == "real":
        manifest = with_real_sglang(manifest)
    workdir = Path(tempfile.mkdtemp(prefix="draftgen-demo-"))
    with ExitStack() as stack:
        cluster = LocalCluster(workdir / "cluster")
        cluster.start()
        stack.callback(cluster.stop)
        demo = Demo(cluster, workdir, manifest, str(ensure_installed()) if args.server == "real" else None)
        print(demo.k("get", "nodes", "-L", "nvidia.com/gpu.product,nvidia.com/gpu.count").strip())
        demo.install()
        demo.volumes()
        demo.start_operator(stack)
        status = demo.run()
        demo.show(status)
        ok = status.get("phase") == "Succeeded"
        say("Succeeded" if ok else f"ended in phase {status.get('phase')}; logs in {workdir}")
        if not ok:
            cluster.keep_logs(workdir / "kept-logs")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
