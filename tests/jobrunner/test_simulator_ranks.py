"""The simulator as the ranks of a replica across nodes (draftgen_simulator/ranks.py), each a process
as a pod's sidecar would be: the leader ready only once the group formed; followers with SGLang's
dummy health, deaf to SIGTERM, ending with the leader; a lost rank stalling the leader, which stays."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from draftgen_contracts import exit_codes
from draftgen_dev.cluster.controlplane import free_port
from tests.conftest import wait_for


def status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def rank(rank_: int, port: int, dist: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "jobrunner.cli", "simulate", "--host", "127.0.0.1", "--port",
                             str(port), "--nnodes", "2", "--node-rank", str(rank_), "--dist-init-addr",
                             f"127.0.0.1:{dist}", "--profile", "fixed:200", "--speedup", "5", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture
def group():
    started: list[subprocess.Popen] = []
    dist, ports = free_port(), (free_port(), free_port())

    def start(rank_: int, *extra: str) -> tuple[subprocess.Popen, str]:
        proc = rank(rank_, ports[rank_], dist, *extra)
        started.append(proc)
        return proc, f"http://127.0.0.1:{ports[rank_]}"
    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def generate(url: str, timeout: float = 10) -> int | None:
    request = urllib.request.Request(url + "/generate", json.dumps(
        {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 20}}).encode(),
        {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status
    except OSError:
        return None


def test_the_leader_is_ready_once_the_group_formed_and_its_ordered_end_ends_the_followers(group):
    leader, url = group(0)
    wait_for(lambda: status(url + "/health") is not None, 20, "the leader listening")
    time.sleep(1)
    assert status(url + "/ready") == 503  # alone: its group has not formed
    follower, follower_url = group(1)
    wait_for(lambda: status(url + "/ready") == 200, 20, "the group formed")
    assert status(follower_url + "/health") == 200 and status(follower_url + "/generate") in (404, 405)
    assert generate(url) == 200
    follower.send_signal(signal.SIGTERM)  # deaf to it, as SGLang's followers are
    time.sleep(1)
    assert follower.poll() is None
    leader.send_signal(signal.SIGTERM)
    assert follower.wait(20) == exit_codes.OK and leader.wait(20) == exit_codes.OK


def test_a_lost_follower_ends_the_leader_by_sigkill_as_the_real_server_over_gloo(group):
    leader, url = group(0)
    follower, _ = group(1)
    wait_for(lambda: status(url + "/ready") == 200, 20, "the group formed")
    follower.kill()
    assert leader.wait(20) == -signal.SIGKILL  # measured on the real SGLang 0.5.23 (docs/multi-node.md)


def test_with_lost_rank_hang_a_lost_follower_stalls_the_leader_which_stays(group):
    leader, url = group(0, "--lost-rank", "hang")
    follower, _ = group(1, "--lost-rank", "hang")
    wait_for(lambda: status(url + "/ready") == 200, 20, "the group formed")
    follower.kill()
    wait_for(lambda: status(url + "/health") == 503, 10, "the leader's health failing")
    assert generate(url, timeout=3) is None  # nothing is made any more: the request waits
    assert leader.poll() is None  # sgl-project/sglang#3099: rank 0 does not exit


def test_a_lost_leader_ends_the_followers_with_a_failure(group):
    leader, url = group(0)
    follower, _ = group(1)
    wait_for(lambda: status(url + "/ready") == 200, 20, "the group formed")
    leader.kill()
    assert follower.wait(20) == exit_codes.FAILED


def test_a_follower_that_never_reaches_its_leader_says_so_and_fails(group):
    follower, _ = group(1, "--join-timeout", "2")
    assert follower.wait(20) == exit_codes.FAILED
    assert "did not answer in 2 s" in follower.stdout.read()
