"""The real SGLang killed in the middle of a run and started again: `jobrunner generate` retries, waits
for the server to be ready again and goes on in the same process; no sample is lost or repeated, and
the budget ends exact."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from draftgen_contracts import exit_codes
from draftgen_dev.real_sglang.server import RealSGLang
from jobrunner import output
from tests.conftest import REPO
from tests.jobrunner.conftest import write_prompts
from tests.real_sglang.test_jobrunner_on_real_sglang import records

BUDGET = 4000
SERVER_ARGS = ("--max-running-requests", "8")


def generate(config_path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "jobrunner", "generate", "--config", str(config_path)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_the_server_killed_mid_run_and_started_again_loses_and_repeats_nothing(real_model, tmp_path):
    server = RealSGLang(real_model, tmp_path / "server.log", *SERVER_ARGS).start()
    config_path = tmp_path / "generate.json"
    config_path.write_text(json.dumps({
        "server_url": server.base_url, "output_root": str(tmp_path / "out"), "tokenizer_path": str(real_model),
        "startup_timeout_s": 120, "progress_interval_s": 0.5, "run_id": "restart",
        "datasets": [{"name": "d", "path": write_prompts(tmp_path / "prompts.jsonl", 300), "budget_tokens": BUDGET,
                      "concurrency": 8}]}))
    try:
        first = generate(config_path)
        deadline = time.monotonic() + 120
        while len(records(tmp_path, "d")) < 3:  # mid-run: some samples written, more in flight
            assert time.monotonic() < deadline and first.poll() is None, server.log_tail()
            time.sleep(0.2)
        os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
        server = RealSGLang(real_model, tmp_path / "server.log", *SERVER_ARGS, port=server.port).start()
        # The process waits for its server to be ready again (as a pod's sidecar restarts in
        # place) and ends the run itself: no second process, no second model load.
        code = first.wait(300)
        assert code == exit_codes.OK, first.stderr.read()[-3000:]
    finally:
        server.stop()
    recs = records(tmp_path, "d")
    rows = [r["row"] for r in recs]
    assert len(rows) == len(set(rows)), "a sample written twice"
    assert all(r["completion_tokens"] == len(r["output_ids"]) for r in recs)
    assert sum(r["completion_tokens"] for r in recs) == BUDGET
    summary = output.read_summary(tmp_path / "out", "d", 0)
    assert summary.completion_tokens == BUDGET and sorted(summary.rows) == sorted(rows)
    print(f"{len(recs)} samples in one process")
