"""Crash safety of a real `jobrunner generate` process: SIGKILL at random moments, then resume;
SIGTERM stops cleanly. The simulator runs in its own process and answers the same prompt with the
same tokens every time, so an uninterrupted reference run says what every record must hold."""

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from draftgen_dev.builders import generate_config
from jobrunner.shared import output
from tests.jobrunner.conftest import write_prompts

ROOT = Path(__file__).resolve().parents[2]
ROWS = 120  # the soak uses more, so that each of its kills still lands in generation


@pytest.fixture
def sim_url():
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobrunner.cli", "simulate", "--port", "0", "--speedup", "25", "--profile", "chat",
         "--seed", "7"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def write_config(tmp_path, url, tokenizer_path, prompts, name) -> Path:
    path = tmp_path / f"{name}.json"
    config = generate_config(url, tmp_path / name, tokenizer_path,
                             [{"name": "d", "path": prompts, "budget_tokens": 10**9, "concurrency": 16}],
                             startup_timeout_s=20, progress_interval_s=0.3, run_id=name)
    path.write_text(json.dumps(config.to_document()))
    return path


def start(config: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "jobrunner.cli", "generate", "--config", str(config)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def read_records(root: Path) -> dict[int, dict]:
    """Records by row, checking that every line is whole and no row appears twice."""
    by_row = {}
    for path in output.record_files(root, "d"):
        for r in output.iter_records(path):
            assert r["row"] not in by_row, f"duplicate {r['sample_id']}"
            assert r["completion_tokens"] == len(r["output_ids"])
            by_row[r["row"]] = r
    return by_row


def assert_final(root: Path, reference: dict[int, dict], rows: int) -> None:
    got = read_records(root)
    assert sorted(got) == sorted(reference) == list(range(rows))
    for row, r in got.items():
        assert r["output_ids"] == reference[row]["output_ids"]
    s = output.read_summary(root, "d", 0)
    assert s.completion_tokens == sum(r["completion_tokens"] for r in got.values())
    assert s.records == rows and s.records_bytes == output.part_path(root, "d", 0).stat().st_size


def wait_for_growth(path: Path, size: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.stat().st_size > size) and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)


def kill_and_resume(tmp_path, sim_url, tokenizer_path, kills: int, seed: int, rows: int = ROWS) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", rows)
    ref = start(write_config(tmp_path, sim_url, tokenizer_path, prompts, "reference"))
    assert ref.wait(timeout=120) == 0, ref.stderr.read()
    reference = read_records(tmp_path / "reference")

    config = write_config(tmp_path, sim_url, tokenizer_path, prompts, "killed")
    root = tmp_path / "killed"
    rng = random.Random(seed)
    seen: dict[int, dict] = {}
    part = output.part_path(root, "d", 0)
    for _ in range(kills):
        proc = start(config)
        if rng.random() < 0.25:  # anywhere in startup and recovery
            time.sleep(rng.uniform(0.0, 4.0))
        else:  # while responses are being written
            wait_for_growth(part, part.stat().st_size if part.exists() else 0, proc)
            time.sleep(rng.uniform(0.0, 0.8))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        now = read_records(root) if root.exists() else {}
        for row, r in seen.items():  # nothing that was written is ever lost or changed
            assert now[row]["output_ids"] == r["output_ids"]
        seen = now
    last = start(config)
    assert last.wait(timeout=120) == 0, last.stderr.read()
    assert_final(root, reference, rows)


def test_sigkill_at_random_moments_then_resume(tmp_path, sim_url, tokenizer_path):
    kill_and_resume(tmp_path, sim_url, tokenizer_path, kills=4, seed=1)


@pytest.mark.slow
def test_sigkill_soak(tmp_path, sim_url, tokenizer_path):
    kill_and_resume(tmp_path, sim_url, tokenizer_path, kills=50, seed=2, rows=1200)


def test_sigterm_stops_cleanly_and_resume_completes(tmp_path, sim_url, tokenizer_path):
    prompts = write_prompts(tmp_path / "prompts.jsonl", ROWS)
    config = write_config(tmp_path, sim_url, tokenizer_path, prompts, "termed")
    part = output.part_path(tmp_path / "termed", "d", 0)
    proc = start(config)
    deadline = time.monotonic() + 60
    while not (part.exists() and part.stat().st_size > 0):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 128 + signal.SIGTERM, proc.stderr.read()  # stopped is not done
    written = read_records(tmp_path / "termed")
    assert 0 < len(written) < ROWS
    s = output.read_summary(tmp_path / "termed", "d", 0)
    assert s.records == len(written) and s.records_bytes == part.stat().st_size  # synced on the way out
    again = start(config)
    assert again.wait(timeout=120) == 0
    assert len(read_records(tmp_path / "termed")) == ROWS
