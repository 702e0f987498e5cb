"""The simulator as the ranks of a multi-node replica, behaving as SGLang 0.5.23's do
(docs/multi-node.md):

- rank 0 (the leader) listens on `--dist-init-addr` for the others, and answers /ready 503 until
  every rank joined (SGLang's leader loads and warms up only once its process group formed); a rank
  that leaves before the leader shut the group down breaks the group, as `--lost-rank` says: `exit`
  (what the real SGLang 0.5.23 does over gloo on the CPU, measured in docs/multi-node.md: the leader
  is killed within seconds, -9) or `hang` (NCCL's on GPUs, sgl-project/sglang#3099: no token is made
  any more, /health answers 503 as SGLang's one-token health generate would, the leader stays);
- a rank > 0 (a follower) joins the leader within a bound, else exits `exit_codes.FAILED` saying so;
  then serves SGLang's dummy health server on `--host:--port` (`/health`, `/health_generate`,
  `/ping` always 200: `launch_dummy_health_check_server`, srt/utils/common.py); ignores SIGTERM as
  SGLang's followers do (they wait for the leader's shutdown broadcast, srt/entrypoints/engine.py);
  exits 0 when the leader shuts the group down in order, `exit_codes.FAILED` when the leader is lost.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time

from aiohttp import web

from draftgen_contracts import exit_codes

log = logging.getLogger("draftgen_simulator")

LOST_RANK = ("exit", "hang")
JOIN = b"join\n"
SHUTDOWN = b"shutdown\n"
JOIN_POLL_S = 0.5


def parse_address(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--dist-init-addr {addr!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


class Leader:
    """Rank 0's side of the group: who joined, and whether a rank was lost."""

    def __init__(self, nnodes: int, address: str, on_lost: str = "exit"):
        if on_lost not in LOST_RANK:
            raise ValueError(f"lost rank {on_lost!r}: expected one of {LOST_RANK}")
        self.on_lost = on_lost
        self.expected = nnodes - 1
        self.host, self.port = parse_address(address)
        self.writers: list[asyncio.StreamWriter] = []
        self.formed = asyncio.Event()
        self.lost = False  # a rank left while the group served: the group is broken for good
        self._closing = False
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._joined, self.host, self.port)

    async def _joined(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await reader.readline() != JOIN:
            writer.close()
            return
        self.writers.append(writer)
        if len(self.writers) >= self.expected:
            self.formed.set()
        await reader.read()  # until the follower's side closes
        if not self._closing:
            self.lost = True
            log.error("a rank left the group: the replica is broken (lost rank: %s)", self.on_lost)
            if self.on_lost == "exit":  # as SGLang's launcher kills its own tree after a scheduler failed
                os.kill(os.getpid(), signal.SIGKILL)

    async def shutdown(self) -> None:
        """The leader's ordered end: every follower told, then the listener closed."""
        self._closing = True
        for writer in self.writers:
            try:
                writer.write(SHUTDOWN)
                await writer.drain()
                writer.close()
            except ConnectionError:
                pass
        if self._server is not None:
            self._server.close()


async def join(address: str, bound_s: float) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to the leader, again until `bound_s`; ConnectionError saying so after it."""
    host, port = parse_address(address)
    deadline, last = time.monotonic() + bound_s, ""
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(JOIN)
            await writer.drain()
            return reader, writer
        except OSError as e:
            last = f"{type(e).__name__}: {e}"
        if time.monotonic() >= deadline:
            raise ConnectionError(f"the leader at {address} did not answer in {bound_s:.0f} s (last: {last})")
        await asyncio.sleep(JOIN_POLL_S)


async def follow(host: str, port: int, address: str, join_bound_s: float) -> int:
    """A rank > 0 for its whole life; its exit code."""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: log.warning(
        "SIGTERM on a follower rank: waiting for the leader's shutdown, as SGLang's followers do"))
    try:
        reader, writer = await join(address, join_bound_s)
    except ConnectionError as e:
        print(f"jobrunner simulate: {e}", flush=True)
        return exit_codes.FAILED
    runner = web.AppRunner(dummy_health_app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    print(f"http://{host}:{port}", flush=True)
    try:
        told = await reader.read()
    finally:
        writer.close()
        await runner.cleanup()
    if told.startswith(SHUTDOWN):
        return exit_codes.OK
    print("jobrunner simulate: the leader is lost", flush=True)
    return exit_codes.FAILED


def dummy_health_app() -> web.Application:
    async def ok(_request: web.Request) -> web.Response:
        return web.Response(status=200)

    app = web.Application()
    app.add_routes([web.get(path, ok) for path in ("/health", "/health_generate", "/ping")])
    return app
