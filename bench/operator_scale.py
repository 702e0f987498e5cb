"""The operator with 100 DatasetGenerations at once: peak RSS and status writes per object.

Each DatasetGeneration has a Kueue queue name, so its Jobs are created suspended and no pod runs
(no Kueue here to admit them); this script plays the pods instead, patching every replica's report
ConfigMap every 2 s with growing token counts, as generation pods do. Over the measured window it
counts the status writes the operator makes (MODIFIED events whose status changed) and samples the
operator's RSS.

    .venv/bin/python bench/operator_scale.py [--objects 100] [--seconds 60]

Prints: peak RSS against the 250 MB goal, and status writes per object per fold interval against
the limit of 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import yaml
from kubernetes import client, watch

REPO = Path(__file__).resolve().parents[1]

from draftgen_contracts import names
from draftgen_dev.builders import SpecBuilder
from draftgen_dev.cluster.controlplane import LocalCluster

RSS_GOAL_MB = 250
FOLD_INTERVAL_S = 2.0
REPLICAS = 2


def manifest(i: int) -> dict:
    builder = SpecBuilder(f"scale-{i:03d}").replicas(REPLICAS).set(queueName="held")
    for k in range(3):
        builder.dataset(f"d{k}", 10**9, f"p{k}.jsonl")
    return builder.obj()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    ns = "scale"
    with LocalCluster(tempfile.mkdtemp(prefix="draftgen-bench-"), local_kubelet=False) as cluster:
        api = cluster.api_client()
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        client.ApiextensionsV1Api(api).create_custom_resource_definition(
            yaml.safe_load((REPO / "crds" / "datasetgenerations.draftgen.io.yaml").read_text()))
        core.create_namespace({"metadata": {"name": ns}})
        for claim in ("models", "data"):
            cluster.create_local_volume(ns, claim)
        time.sleep(3)
        log = open(cluster.logs_dir / "operator.log", "ab")
        env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "DRAFTGEN_FOLD_INTERVAL": str(FOLD_INTERVAL_S),
               "DRAFTGEN_METRICS_PORT": "0"}
        operator = subprocess.Popen([sys.executable, "-m", "draftgen_operator.cli", "operator", "--namespace", ns,
                                     "--liveness", ""], env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            started = time.monotonic()
            for i in range(args.objects):
                custom.create_namespaced_custom_object(names.GROUP, names.VERSION, ns, names.PLURAL, manifest(i))
            reports = [(f"scale-{i:03d}", r) for i in range(args.objects) for r in range(REPLICAS)]

            def all_reports_exist():
                present = {c.metadata.name for c in core.list_namespaced_config_map(
                    ns, label_selector=f"{names.LABEL_REPORT}=true").items}
                return all(names.report_name(n, r) in present for n, r in reports)

            while not all_reports_exist():
                time.sleep(1)
            print(f"{args.objects} DatasetGenerations reconciled (children created) in "
                  f"{time.monotonic() - started:.1f}s")

            writes: dict[str, int] = {}
            stop = threading.Event()

            def count_status_writes():
                last: dict[str, dict] = {}
                w = watch.Watch()
                try:
                    for event in w.stream(custom.list_namespaced_custom_object, "draftgen.io", "v1alpha1", ns,
                                          "datasetgenerations", timeout_seconds=int(args.seconds) + 30):
                        obj = event["object"]
                        name, status = obj["metadata"]["name"], obj.get("status")
                        if name in last and status != last[name] and not stop.is_set() and measuring.is_set():
                            writes[name] = writes.get(name, 0) + 1
                        last[name] = status
                        if stop.is_set():
                            w.stop()
                except Exception:  # the control plane stopped under the watch at the end of the run
                    pass

            measuring = threading.Event()
            watcher = threading.Thread(target=count_status_writes, daemon=True)
            watcher.start()
            proc = psutil.Process(operator.pid)
            peak = proc.memory_info().rss
            tokens = 0
            time.sleep(2)
            measuring.set()
            t0 = time.monotonic()
            next_publish = t0
            while time.monotonic() - t0 < args.seconds:
                if time.monotonic() >= next_publish:  # every replica of every object reports, like the pods
                    tokens += 1000
                    for name, r in reports:
                        doc = {"replica": r, "replicas": REPLICAS, "updated_at": time.time(), "finished": False,
                               "datasets": {f"d{k}": {"state": "Generating", "completion_tokens": tokens,
                                                      "samples": tokens // 500, "tokens_per_second": 500.0}
                                            for k in range(3)}}
                        core.patch_namespaced_config_map(names.report_name(name, r), ns,
                                                         {"data": {names.REPORT_KEY: json.dumps(doc)}})
                    next_publish += 2.0
                peak = max(peak, proc.memory_info().rss)
                time.sleep(0.2)
            elapsed = time.monotonic() - t0
            stop.set()
            measuring.clear()
        finally:
            operator.terminate()
            operator.wait(30)
    per_object = sum(writes.values()) / args.objects
    rate = per_object / (elapsed / FOLD_INTERVAL_S)
    print(f"objects                 {args.objects} (x {REPLICAS} replicas reporting every 2 s for {elapsed:.0f} s)")
    print(f"operator peak RSS       {peak / 2**20:.0f} MB   ratio to the {RSS_GOAL_MB} MB goal: "
          f"{peak / 2**20 / RSS_GOAL_MB:.2f}")
    print(f"status writes           {sum(writes.values())} ({per_object:.1f} per object, max {max(writes.values(), default=0)})")
    print(f"writes per object per fold interval ({FOLD_INTERVAL_S:.0f} s): {rate:.2f}   (limit 1.00)")
    return 0 if peak / 2**20 <= RSS_GOAL_MB and rate <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
