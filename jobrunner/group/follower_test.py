"""The follower's verdicts, and its loop against scripted checks."""

import asyncio
import time

from draftgen_contracts import exit_codes
from draftgen_contracts.progress import ProgressDocument
from jobrunner.group.follower import MISSES, Misses, ended_in_order, follow, leader_accepts


def test_a_check_counts_only_after_misses_in_a_row():
    misses = Misses()
    for _ in range(MISSES - 1):
        misses = misses.after(server_ok=False, leader_ok=True)
    assert misses.group_gone() is None
    assert misses.after(server_ok=True, leader_ok=True) == Misses()  # one answer forgives the misses
    assert "this rank's server" in misses.after(server_ok=False, leader_ok=True).group_gone()
    leader = Misses(leader=MISSES - 1).after(server_ok=True, leader_ok=False)
    assert "the leader's rendezvous" in leader.group_gone()


def test_only_a_finished_report_made_since_the_follower_started_is_an_ordered_end():
    assert ended_in_order(ProgressDocument(replica=0, replicas=1, finished=True, updated_at=100.0), since=90.0)
    assert not ended_in_order(ProgressDocument(replica=0, replicas=1, finished=True, updated_at=80.0), since=90.0)
    assert not ended_in_order(ProgressDocument(replica=0, replicas=1, updated_at=100.0), since=90.0)
    assert not ended_in_order(None, since=90.0)


def scripted(*answers):
    queue = list(answers)

    async def checks():
        return queue.pop(0) if queue else (True, True)
    return checks


async def test_a_lost_group_fails_and_a_finished_one_ends_in_order():
    lost = scripted(*[(True, False)] * MISSES)
    assert await follow("http://x", ("127.0.0.1", 1), lambda: None, interval_s=0, checks=lost) == exit_codes.FAILED
    finished = ProgressDocument(replica=0, replicas=1, finished=True, updated_at=time.time() + 1)
    ended = scripted(*[(False, False)] * MISSES)
    assert await follow("http://x", ("127.0.0.1", 1), lambda: finished, interval_s=0, checks=ended) == exit_codes.OK


async def test_the_leaders_rendezvous_is_a_port_that_accepts():
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    assert await leader_accepts("127.0.0.1", port)
    server.close()
    await server.wait_closed()
    assert not await leader_accepts("127.0.0.1", port)


async def test_sigterm_is_success_only_once_the_leader_finished():
    """A worker rank stopped before its leader finished (its pod evicted, its node drained) must not
    exit 0: its index would be complete and never run again."""
    import os
    import signal

    async def term_soon(report):
        async def checks():
            os.kill(os.getpid(), signal.SIGTERM)
            return True, True
        return await follow("http://x", ("127.0.0.1", 1), lambda: report, interval_s=0.05, checks=checks)
    assert await term_soon(None) == 128 + signal.SIGTERM
    finished = ProgressDocument(replica=0, replicas=1, finished=True, updated_at=time.time() + 1)
    assert await term_soon(finished) == exit_codes.OK
