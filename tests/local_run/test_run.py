"""`draftgen run` end to end on tmp folders: examples/quickstart.yaml with budgets shrunk to seconds."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from draftgen_operator import cli
from jobrunner.shared.corpus import iter_corpus
from jobrunner.shared.output import iter_records, read_summary, record_files

from .conftest import quickstart, write_spec

DATASETS = ("chat", "tools", "sharegpt")


def draftgen_run(*argv) -> int:
    return cli.main(["run", *map(str, argv)])


def sample_ids(output_root: Path) -> list[str]:
    return [r["sample_id"] for p in record_files(output_root) for r in iter_records(p)]


def merged_records(output_root: Path) -> int:
    """Generation records the corpus's merge read (kept, deduplicated or dropped)."""
    manifest = json.loads((output_root / "corpus" / "manifest.json").read_text())
    return sum(d["input_records"] for d in manifest["datasets"].values())


def assert_budgets_met(output_root: Path, budget_tokens: int) -> None:
    for name in DATASETS:
        assert read_summary(output_root, name, 0).completion_tokens >= budget_tokens, name


def files_and_times(root: Path, leave_out: str) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file() and leave_out not in p.parts}


def test_quickstart_end_to_end_then_a_rerun_changes_nothing(tmp_path, data_dir, model_dir, capsys):
    spec = write_spec(tmp_path / "quickstart.yaml", quickstart(budget_tokens=800))
    assert draftgen_run(spec, "--data-dir", data_dir, "--model-dir", model_dir) == 0
    out = capsys.readouterr().out
    root = data_dir / "quickstart"  # <data-dir>/<metadata.name>, as in the pods
    assert "server.replicas=2 is ignored locally" in out
    assert "generate: 100.0% of the budgets" in out  # the plain progress lines (stdout is not a terminal)
    assert_budgets_met(root, 800)
    ids = sample_ids(root)
    assert len(ids) == len(set(ids))
    assert merged_records(root) == len(ids)
    corpus_ids = {r["sample_id"] for r in iter_corpus(root / "corpus")}
    index = json.loads((root / "hidden-states" / "index.json").read_text())
    assert index["complete"] and set(index["samples"]) == corpus_ids
    # The extraction's progress file, read as the operator reads its ConfigMap: the status and the estimate.
    status = json.loads((root / "local-run" / "state.json").read_text())["status"]
    assert status["extraction"]["finished"] and status["extraction"]["tokens"] == index["tokens"]
    assert status["estimate"]["extractionRateBasis"] == "measured"
    assert {p.name for p in (root / "stats").iterdir()} == {f"{d}.png" for d in DATASETS} | {"overview.png", "stats.md"}
    assert "| budget met |" in (root / "stats" / "stats.md").read_text()  # the budgets were passed on

    before = files_and_times(root, leave_out="stats")
    assert draftgen_run(spec, "--data-dir", data_dir, "--model-dir", model_dir) == 0
    out = capsys.readouterr().out
    for command in ("generate", "merge", "extract"):
        assert f"{command}: done already (stored output), skipped" in out
    assert files_and_times(root, leave_out="stats") == before

    # A rerun is an update of the object: what the API server keeps immutable is refused, naming it.
    changed = quickstart(budget_tokens=800)
    changed["spec"]["datasets"][0]["format"] = "parquet"
    changed["spec"]["model"]["path"] = "another-model"
    assert draftgen_run(write_spec(tmp_path / "quickstart.yaml", changed), "--data-dir", data_dir,
                        "--model-dir", model_dir) == 2
    err = capsys.readouterr().err
    assert "spec.model: is immutable" in err and "spec.datasets[0].format: is immutable" in err, err
    assert files_and_times(root, leave_out="stats") == before


def test_ctrl_c_stops_the_children_and_a_rerun_resumes_without_duplicates(tmp_path, data_dir, model_dir, capsys):
    spec = write_spec(tmp_path / "quickstart.yaml",
                      quickstart(budget_tokens=3000, server_args=["--per-request-tps", "50"], extraction=False))
    root = data_dir / "quickstart"
    proc = subprocess.Popen([sys.executable, "-m", "draftgen_operator.cli", "run", str(spec), "--data-dir", str(data_dir),
                             "--model-dir", str(model_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        progress = root / "coordination" / "progress-r000.json"
        deadline = time.monotonic() + 60
        while not (progress.exists() and any(d["completion_tokens"] for d in
                                             json.loads(progress.read_text())["datasets"].values())):
            assert proc.poll() is None and time.monotonic() < deadline, "no tokens before the interrupt"
            time.sleep(0.2)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) == 2  # the simulator and generate
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "rerun the same command to resume" in err
    assert "merge:" not in out
    assert not any(c.is_running() for c in children)
    first = sample_ids(root)
    assert first
    written = {p: p.read_bytes() for p in record_files(root)}

    write_spec(spec, quickstart(budget_tokens=3000, extraction=False))  # the rest at the usual speed
    assert draftgen_run(spec, "--data-dir", data_dir, "--model-dir", model_dir) == 0
    ids = sample_ids(root)
    assert len(ids) == len(set(ids)) and set(first) < set(ids)
    assert all(p.read_bytes().startswith(b) for p, b in written.items())  # appended to, nothing lost
    assert_budgets_met(root, 3000)
    assert merged_records(root) == len(ids)


def test_server_url_uses_a_running_server_and_starts_none(tmp_path, data_dir, model_dir, simulator):
    sim = simulator(vocab_size=512, eos_token_id=2, context_len=2048, speedup=20)
    obj = quickstart(budget_tokens=500, extraction=False, output={"claimName": "data", "path": "runs/qs"})
    spec = write_spec(tmp_path / "quickstart.yaml", obj)
    assert draftgen_run(spec, "--data-dir", data_dir, "--model-dir", model_dir, "--server-url", sim.base_url) == 0
    assert sim.stats.completed > 0
    root = data_dir / "runs" / "qs"  # <data-dir>/<output.path>
    assert not (root / "local-run" / "simulator.log").exists()
    assert_budgets_met(root, 500)
    assert (root / "corpus" / "manifest.json").exists() and not (root / "hidden-states").exists()


def test_a_spec_with_an_endpoint_runs_against_that_server_and_its_preflight_checks_the_model(
        tmp_path, data_dir, model_dir, simulator):
    """spec.server.endpoint locally: no simulator started, the endpoint's URL for every stage."""
    sim = simulator(vocab_size=512, eos_token_id=2, context_len=2048, speedup=20, model_path="/models/tiny")
    obj = quickstart(budget_tokens=500, extraction=False)
    server = obj["spec"]["server"]
    for key in ("image", "command", "args"):
        del server[key]
    server["endpoint"] = {"url": sim.base_url}
    assert draftgen_run(write_spec(tmp_path / "endpoint.yaml", obj), "--data-dir", data_dir,
                        "--model-dir", model_dir) == 0
    root = data_dir / "quickstart"
    assert sim.stats.completed > 0 and not (root / "local-run" / "simulator.log").exists()
    assert_budgets_met(root, 500)


def test_a_failing_stage_is_named_with_the_end_of_its_log(tmp_path, model_dir, capsys):
    spec = write_spec(tmp_path / "quickstart.yaml", quickstart(extraction=False))
    empty = tmp_path / "empty"  # no prompts under --data-dir
    empty.mkdir()
    assert draftgen_run(spec, "--data-dir", empty, "--model-dir", model_dir) == 2  # exit 2: FailJob at once
    err = capsys.readouterr().err
    # the Failed condition the operator would write: the Job, Kubernetes' reason, the pod's own words;
    # the preflight finds it before any server is started
    assert "draftgen run: preflight failed: Job quickstart-preflight failed (PodFailurePolicy" in err
    assert f"preflight: the run's inputs: datasets[0] (chat): {empty / 'prompts' / 'chat.jsonl'}: no such file" in err


def test_a_simulator_that_dies_fails_generate_at_once(tmp_path, data_dir, model_dir):
    spec = write_spec(tmp_path / "quickstart.yaml",
                      quickstart(budget_tokens=3000, server_args=["--per-request-tps", "20"], extraction=False))
    proc = subprocess.Popen([sys.executable, "-m", "draftgen_operator.cli", "run", str(spec), "--data-dir", str(data_dir),
                             "--model-dir", str(model_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        progress = data_dir / "quickstart" / "coordination" / "progress-r000.json"
        deadline = time.monotonic() + 60
        while not (progress.exists() and any(d["in_flight"] for d in
                                             json.loads(progress.read_text())["datasets"].values())):
            assert proc.poll() is None and time.monotonic() < deadline, "nothing in flight"
            time.sleep(0.2)
        children = psutil.Process(proc.pid).children(recursive=True)
        [simulator] = [c for c in children if "simulate" in c.cmdline()]
        simulator.kill()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "draftgen run: generate failed: Job quickstart-gen-r000 failed (ServerFailed" in err
    assert f"the simulator exited with {-signal.SIGKILL}" in err
    assert not any(c.is_running() for c in children)


def test_a_missing_checkpoint_is_found_before_any_generation(tmp_path, data_dir, capsys):
    spec = write_spec(tmp_path / "quickstart.yaml", quickstart())
    assert draftgen_run(spec, "--data-dir", data_dir, "--model-dir", tmp_path / "no-models") == 2
    err = capsys.readouterr().err
    assert f"draftgen run: extract failed: the model checkpoint {tmp_path / 'no-models' / 'tiny'} is not a directory" in err
    assert not (data_dir / "quickstart").exists()


def test_the_output_of_a_run_with_more_replicas_is_refused_untouched(tmp_path, data_dir, model_dir, capsys):
    part = data_dir / "quickstart" / "generate" / "chat" / "part-r001.jsonl"
    part.parent.mkdir(parents=True)
    part.write_text('{"sample_id": "chat/000000001"}\n')
    spec = write_spec(tmp_path / "quickstart.yaml", quickstart())
    assert draftgen_run(spec, "--data-dir", data_dir, "--model-dir", model_dir) == 2
    assert "holds the output of replicas [1]" in capsys.readouterr().err
    assert [p.name for p in (data_dir / "quickstart").rglob("*") if p.is_file()] == [part.name]


def test_a_replica_across_nodes_is_refused_here_before_anything_runs(tmp_path, data_dir, model_dir, capsys):
    obj = quickstart()
    obj["spec"]["server"].update(nodesPerReplica=2, tensorParallelSize=16)
    assert draftgen_run(write_spec(tmp_path / "quickstart.yaml", obj), "--data-dir", data_dir,
                        "--model-dir", model_dir) == 2
    assert "server.nodesPerReplica=2: a replica across nodes runs on a cluster" in capsys.readouterr().err
    assert not (data_dir / "quickstart").exists()


def test_existing_traces_join_the_corpus_as_they_are_and_are_counted_under_their_name(tmp_path, data_dir, model_dir):
    from draftgen_dev.demo_assets import write_traces

    write_traces(data_dir / "prompts" / "traces.jsonl", 40, model_dir / "tiny")
    obj = quickstart(budget_tokens=600, extraction=False)
    obj["spec"]["datasets"].append({"name": "kimi-traces", "path": "prompts/traces.jsonl", "kind": "traces",
                                    "budgetTokens": 400})
    assert draftgen_run(write_spec(tmp_path / "traces.yaml", obj), "--data-dir", data_dir, "--model-dir",
                        model_dir) == 0
    root = data_dir / "quickstart"
    status = json.loads((root / "local-run" / "state.json").read_text())["status"]
    traces = next(d for d in status["datasets"] if d["name"] == "kimi-traces")
    assert traces["state"] == "BudgetMet" and traces["tokens"] >= 400
    written = [r for p in record_files(root, "kimi-traces") for r in iter_records(p)]
    assert all(r["source"] == "trace" for r in written) and sum(r["completion_tokens"] for r in written) == traces["tokens"]
    manifest = json.loads((root / "corpus" / "manifest.json").read_text())
    assert manifest["datasets"]["kimi-traces"]["from_traces"] == len(written)
    assert manifest["datasets"]["chat"]["from_traces"] == 0
    preflight = next(d for d in status["preflight"]["datasets"] if d["name"] == "kimi-traces")
    assert preflight["usableRows"] == 40, preflight


def test_a_server_env_from_a_configmap_is_refused_naming_it_for_nothing_stands_for_it_here(tmp_path, data_dir,
                                                                                             model_dir, capsys):
    obj = quickstart(budget_tokens=300, extraction=False)
    obj["spec"]["server"]["env"] = [{"name": "NCCL_DEBUG", "valueFrom": {"configMapKeyRef": {"name": "nccl",
                                                                                             "key": "level"}}}]
    spec = write_spec(tmp_path / "quickstart.yaml", obj)
    assert draftgen_run(spec, "--data-dir", data_dir, "--model-dir", model_dir) == 2
    err = capsys.readouterr().err
    assert "container sglang: env NCCL_DEBUG comes from" in err and "configMapKeyRef" in err, err
