"""A replica across two nodes on the real SGLang 0.5.23: two launch_server processes on 127.0.0.1
(`--nnodes 2 --node-rank 0|1 --dist-init-addr`, tensor parallel over both, gloo on the CPU), as a
group's two pods start them (docs/multi-node.md). `jobrunner generate` meets its budget through rank 0;
the follower's two checks hold on the real ranks (rank 1's dummy /health, rank 0's rendezvous port, a
torch TCPStore); the leader killed, rank 1 follows it down and the follower says the group is lost."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from draftgen_contracts import exit_codes
from draftgen_dev.real_sglang.server import RealSGLang, free_port
from jobrunner.generate.run import run_generate
from jobrunner.group import follower
from tests.jobrunner.conftest import write_prompts
from tests.real_sglang.test_jobrunner_on_real_sglang import config, records

# SGLang binds each CPU rank's OpenMP threads to cores: one core per rank ("tp rank 0|tp rank 1"),
# else it refuses more ranks than NUMA nodes (srt/utils/numa_utils.py, docs/multi-node.md).
BIND = {"SGLANG_CPU_OMP_THREADS_BIND": "0|1"}


def ports_clear_of(dist: int, n: int) -> list[int]:
    """`n` free ports none of which SGLang takes from the rendezvous port upwards (its other ports
    start at dist + 1: srt/server_args.py's port arguments), which free ports in a row may be."""
    ports = []
    while len(ports) < n:
        port = free_port()
        if not dist <= port <= dist + 100 and port not in ports:
            ports.append(port)
    return ports


@pytest.fixture
def group(real_model, tmp_path):
    dist = free_port()
    ranks = [RealSGLang(real_model, tmp_path / f"rank{rank}.log", "--tp-size", "2", "--nnodes", "2",
                        "--node-rank", str(rank), "--dist-init-addr", f"127.0.0.1:{dist}", port=port)
             for rank, port in enumerate(ports_clear_of(dist, 2))]
    try:
        for rank in reversed(ranks):
            rank.launch(BIND)
        ranks[0].wait_ready()
        yield ranks, dist
    finally:
        for rank in ranks:
            rank.stop()


def until_exit(server: RealSGLang, timeout_s: float) -> int | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.proc.poll() is None:
        time.sleep(0.2)
    return server.proc.poll()


async def test_a_two_node_replica_generates_through_rank_0_and_its_follower_sees_the_leader_lost(
        group, real_model, tmp_path):
    (leader, worker), dist = group
    assert worker.get("/health")[0] == 200  # the dummy health server a rank > 0 serves
    prompts = write_prompts(tmp_path / "prompts.jsonl", 20)
    cfg = config(leader, tmp_path, real_model, [{"name": "a", "path": prompts, "budget_tokens": 200,
                                                  "concurrency": 4}])
    assert await run_generate(cfg) == exit_codes.OK, leader.log_tail()
    assert sum(r["completion_tokens"] for r in records(tmp_path, "a")) >= 200

    # The follower's checks on the real ranks, then the leader lost under it.
    assert await follower.leader_accepts("127.0.0.1", dist)
    watching = asyncio.create_task(follower.follow(worker.base_url, ("127.0.0.1", dist), lambda: None,
                                                   interval_s=0.5))
    await asyncio.sleep(3)  # six rounds of probes: the leader's store takes them and the group serves on
    assert not watching.done() and leader.alive() and worker.alive()
    assert leader.post("/generate", {"input_ids": [1, 5, 7], "sampling_params": {"max_new_tokens": 2}})[0] == 200
    os.killpg(leader.proc.pid, signal.SIGKILL)
    assert await asyncio.wait_for(watching, 60) == exit_codes.FAILED
    assert await asyncio.to_thread(until_exit, worker, 30) is not None, "rank 1 outlived its leader"
