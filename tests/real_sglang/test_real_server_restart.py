"""The real SGLang killed in the middle of a run and started again: `jobrunner generate` retries, waits
for the server to be ready again and goes on in the same process; no sample is lost or repeated, and
the budget ends exact. The tier's shared server is the one killed, and started again in place with
its own arguments and port, so the tests after this one find it as they would have (one model load
fewer than a server of this test's own)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from draftgen_contracts import exit_codes
from draftgen_dev.builders import generate_config
from jobrunner.shared import output
from tests.conftest import REPO
from tests.jobrunner.conftest import write_prompts
from tests.real_sglang.conftest import CONTEXT_LEN
from tests.real_sglang.test_jobrunner_on_real_sglang import records

BUDGET = 4000


def generate(config_path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "jobrunner", "generate", "--config", str(config_path)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_the_server_killed_mid_run_and_started_again_loses_and_repeats_nothing(real_sglang, real_model, tmp_path):
    config_path = tmp_path / "generate.json"
    config = generate_config(real_sglang.base_url, tmp_path / "out", real_model, [
        {"name": "d", "path": write_prompts(tmp_path / "prompts.jsonl", 300), "budget_tokens": BUDGET, "concurrency": 8}],
        startup_timeout_s=120, progress_interval_s=0.5, run_id="restart", context={"length": CONTEXT_LEN})
    config_path.write_text(json.dumps(config.to_document()))
    first = generate(config_path)
    try:
        deadline = time.monotonic() + 120
        while len(records(tmp_path, "d")) < 3:  # mid-run: some samples written, more in flight
            assert time.monotonic() < deadline and first.poll() is None, real_sglang.log_tail()
            time.sleep(0.2)
        os.killpg(real_sglang.proc.pid, signal.SIGKILL)
        real_sglang.proc.wait()
        real_sglang.start()  # the same arguments and port
        # The process waits for its server to be ready again (as a pod's sidecar restarts in
        # place) and ends the run itself: no second process, no second model load.
        code = first.wait(300)
        assert code == exit_codes.OK, first.stderr.read()[-3000:]
    finally:
        if first.poll() is None:
            first.kill()
    recs = records(tmp_path, "d")
    rows = [r["row"] for r in recs]
    assert len(rows) == len(set(rows)), "a sample written twice"
    assert all(r["completion_tokens"] == len(r["output_ids"]) for r in recs)
    assert sum(r["completion_tokens"] for r in recs) == BUDGET
    summary = output.read_summary(tmp_path / "out", "d", 0)
    assert summary.completion_tokens == BUDGET and sorted(summary.rows) == sorted(rows)
    print(f"{len(recs)} samples in one process")
