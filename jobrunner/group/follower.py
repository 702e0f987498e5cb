"""A rank > 0 of a replica across nodes, after its server joined the group: watch the group until the
leader's work is done or the group is lost.

SGLang's ranks > 0 serve no API, only a dummy /health that always answers 200 (docs/multi-node.md),
and ignore SIGTERM: the follower is the worker pod's liveness. It watches two things, each missed
MISSES times in a row before it counts: its own server (/health on the pod: gone when the server
process died, as it does within seconds when the group breaks over gloo) and the leader's rendezvous
(a TCP connect to --dist-init-addr: gone when the leader's process or pod is). When either is gone it
reads its replica's report: finished since this follower started means the leader ended the group in
order (exit 0); otherwise the group is lost (exit FAILED, which fails the Job: the operator starts the
whole group again, and the new leader resumes from the replica's output).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp

from draftgen_contracts import exit_codes
from draftgen_contracts.progress import ProgressDocument

log = logging.getLogger("jobrunner.group")

MISSES = 3  # a check missed this many times in a row counts (one slow answer is not a lost group)
INTERVAL_S = 2.0
CHECK_TIMEOUT_S = 5.0


@dataclass
class Misses:
    """Each check's misses in a row."""

    server: int = 0
    leader: int = 0

    def after(self, server_ok: bool, leader_ok: bool) -> Misses:
        return Misses(0 if server_ok else self.server + 1, 0 if leader_ok else self.leader + 1)

    def group_gone(self, limit: int = MISSES) -> str | None:
        """What is gone, once a check missed `limit` times in a row; None while both hold."""
        if self.server >= limit:
            return f"this rank's server stopped answering /health ({self.server} checks in a row)"
        if self.leader >= limit:
            return f"the leader's rendezvous stopped accepting connections ({self.leader} checks in a row)"
        return None


def ended_in_order(report: ProgressDocument | None, since: float) -> bool:
    """Whether the replica's report says its work finished, in a report made after `since` (an older
    one, a previous group's, says nothing of this one)."""
    return report is not None and report.finished and (report.updated_at or 0) >= since


def read_report(own_report: Callable[[], ProgressDocument | None]) -> ProgressDocument | None:
    """The replica's report, read a few times over a few seconds before an error counts as none."""
    for attempt in range(3):
        try:
            return own_report()
        except Exception as e:
            log.warning("the replica's report not read: %s: %s", type(e).__name__, e)
            time.sleep(attempt + 1)
    return None


async def server_answers(session: aiohttp.ClientSession, server_url: str) -> bool:
    try:
        async with session.get(f"{server_url}/health", timeout=aiohttp.ClientTimeout(total=CHECK_TIMEOUT_S)) as r:
            return r.status == 200
    except (aiohttp.ClientError, asyncio.TimeoutError):
        return False


async def leader_accepts(host: str, port: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CHECK_TIMEOUT_S)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True


async def follow(server_url: str, leader: tuple[str, int], own_report: Callable[[], ProgressDocument | None],
                 interval_s: float = INTERVAL_S,
                 checks: Callable[[], Awaitable[tuple[bool, bool]]] | None = None) -> int:
    """Watch the group to its end; the exit status. SIGTERM after the leader finished the replica's work
    (the Job ended with its leader) ends it with 0; SIGTERM before (a drain, an eviction) with 143: a
    worker that exited 0 would complete its index, and the Job would never run that rank again, leaving
    the leader to wait for a group that cannot form."""
    started, misses = time.time(), Misses()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with aiohttp.ClientSession() as session:
        async def both() -> tuple[bool, bool]:
            return await asyncio.gather(server_answers(session, server_url), leader_accepts(*leader))

        while not stop.is_set():
            misses = misses.after(*(await (checks or both)()))
            if (gone := misses.group_gone()) is not None:
                if ended_in_order(read_report(own_report), started):
                    log.info("the leader finished the replica's work and ended the group")
                    return exit_codes.OK
                log.error("the group is lost: %s; the Job fails so that the whole group starts again", gone)
                return exit_codes.FAILED
            try:
                await asyncio.wait_for(stop.wait(), interval_s)
            except asyncio.TimeoutError:
                pass
    if ended_in_order(read_report(own_report), started):
        log.info("SIGTERM: the group's Job is ending")
        return exit_codes.OK
    log.warning("SIGTERM before the leader finished the replica's work: this rank was stopped")
    return exit_codes.interrupted(signal.SIGTERM)
