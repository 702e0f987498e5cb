"""Early shutdown and status freshness, end to end on the local control plane.

Runs N DatasetGenerations one after another (two generation replicas each, real `jobrunner
generate` in the pods against the simulator sidecar). For each it measures:

- shutdown: from the moment the dataset's budget was crossed (the finish time of the record that
  took the summed tokens of both replicas over the budget) to the moment the last generation pod
  was gone from the API server (goal: 5 s or less at p95);
- freshness: for every record, from its finish time to the first status read showing at least the
  tokens written up to it (goal: 10 s or less at p95).

    .venv/bin/python bench/operator_latency.py [--runs 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from kubernetes import client, watch

REPO = Path(__file__).resolve().parents[1]

from draftgen_contracts import names
from draftgen_dev.cluster.controlplane import LocalCluster
from draftgen_dev.demo_assets import build_model, write_datasets
from jobrunner.shared.output import iter_records, record_files

SHUTDOWN_GOAL_S, FRESHNESS_GOAL_S = 5.0, 10.0
NS = "latency"


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 2 else values[0]


def manifest(name: str, budget: int) -> dict:
    example = yaml.safe_load((REPO / "examples" / "quickstart.yaml").read_text())
    spec = example["spec"]
    spec["datasets"] = [{"name": "chat", "path": "prompts/chat.jsonl", "budgetTokens": budget}]
    spec["extraction"]["enabled"] = False
    spec["output"]["path"] = name
    example["metadata"]["name"] = name
    return example


def one_run(cluster, api, name: str, budget: int, data: Path) -> tuple[float, list[float]]:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    gone_at: list[float] = []
    polls: list[tuple[float, int]] = []
    done = threading.Event()

    def watch_pods():
        w = watch.Watch()
        try:
            for event in w.stream(core.list_namespaced_pod, NS, timeout_seconds=600,
                                  label_selector=f"{names.LABEL_NAME}={name},{names.LABEL_COMPONENT}=generate"):
                if event["type"] == "DELETED":
                    gone_at.append(time.time())
                if done.is_set() and len(gone_at) >= 2:
                    w.stop()
        except Exception:  # the control plane stopped under the watch at the end of the run
            pass

    watcher = threading.Thread(target=watch_pods, daemon=True)
    watcher.start()
    custom.create_namespaced_custom_object("draftgen.io", "v1alpha1", NS, "datasetgenerations", manifest(name, budget))
    while True:
        status = custom.get_namespaced_custom_object("draftgen.io", "v1alpha1", NS, "datasetgenerations",
                                                     name).get("status") or {}
        polls.append((time.time(), status.get("tokens", 0)))
        if status.get("stage") in ("Merging", "Done") and len(gone_at) >= 2:
            break
        if status.get("phase") == "Failed":
            raise RuntimeError(f"{name} failed: {status.get('conditions')}")
        time.sleep(0.25)
    done.set()
    records = sorted((r for f in record_files(str(data / name)) for r in iter_records(f)),
                     key=lambda r: r["timings"]["finished_at"])
    cumulative, crossing, lags = 0, None, []
    for record in records:
        cumulative += record["completion_tokens"]
        finished = record["timings"]["finished_at"]
        if crossing is None and cumulative >= budget:
            crossing = finished
        seen = next((t for t, tokens in polls if tokens >= cumulative and t >= finished), None)
        if seen is not None:
            lags.append(seen - finished)
    return max(gone_at) - crossing, lags


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--budget", type=int, default=12000)
    args = parser.parse_args()
    with LocalCluster(tempfile.mkdtemp(prefix="draftgen-bench-")) as cluster:
        api = cluster.api_client()
        client.ApiextensionsV1Api(api).create_custom_resource_definition(
            yaml.safe_load((REPO / "crds" / "datasetgenerations.draftgen.io.yaml").read_text()))
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
        build_model(cluster.create_local_volume(NS, "models") / "tiny")
        data = cluster.create_local_volume(NS, "data")
        write_datasets(data / "prompts", rows_per_dataset=2000)
        time.sleep(3)
        env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "DRAFTGEN_FOLD_INTERVAL": "1",
               "DRAFTGEN_EXTRA_POD_LABELS": "draftgen.io/local-kubelet=true", "DRAFTGEN_METRICS_PORT": "0"}
        log = open(cluster.logs_dir / "operator.log", "ab")
        operator = subprocess.Popen([sys.executable, "-m", "draftgen_operator.cli", "operator", "--namespace", NS,
                                     "--liveness", ""], env=env, stdout=log, stderr=subprocess.STDOUT)
        shutdowns, lags = [], []
        try:
            for i in range(args.runs):
                shutdown, run_lags = one_run(cluster, api, f"lat-{i}", args.budget, data)
                shutdowns.append(shutdown)
                lags += run_lags
                print(f"run {i}: budget met -> generation pods gone {shutdown:.2f} s; "
                      f"status freshness p95 {p95(run_lags):.2f} s over {len(run_lags)} records", flush=True)
        finally:
            operator.terminate()
            operator.wait(30)
    s95, f95 = p95(shutdowns), p95(lags)
    print(f"shutdown  p50 {statistics.median(shutdowns):.2f} s  p95 {s95:.2f} s  "
          f"ratio to the {SHUTDOWN_GOAL_S:.0f} s goal: {s95 / SHUTDOWN_GOAL_S:.2f}")
    print(f"freshness p50 {statistics.median(lags):.2f} s  p95 {f95:.2f} s  "
          f"ratio to the {FRESHNESS_GOAL_S:.0f} s goal: {f95 / FRESHNESS_GOAL_S:.2f}")
    return 0 if s95 <= SHUTDOWN_GOAL_S and f95 <= FRESHNESS_GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
