"""Rows read and tokenized on a worker thread, a chunk ahead of the engine that sends them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
from collections.abc import AsyncIterator, Callable, Iterator


async def prepared_prompts(
    rows: Iterator, prepare: Callable, is_done: Callable[[int], bool],
    executor: concurrent.futures.Executor, chunk: int = 64,
) -> AsyncIterator:
    """Rows prepared on `executor` (reading and tokenizing never run on the event loop), a chunk
    ahead of the consumer; rows for which `is_done(row)` holds are passed over untokenized."""
    loop = asyncio.get_running_loop()
    todo = (prepare(r) for r in rows if not is_done(r.row))

    def next_chunk() -> list:
        return list(itertools.islice(todo, chunk))

    pending = loop.run_in_executor(executor, next_chunk)
    try:
        while True:
            items = await pending
            if not items:
                return
            pending = loop.run_in_executor(executor, next_chunk)
            for item in items:
                yield item
    finally:
        pending.cancel()
