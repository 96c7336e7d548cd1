"""The body deadline holds when a chunk arrives in the very loop iteration the deadline
passes. gunicorn's `receive` waits with `asyncio.wait_for`, which on Python 3.11 returns a
completed result and swallows the cancellation that `asyncio.timeout_at` sent: the body reader
must still answer 408 and give the bytes back, never let the lost timeout surface as a 500."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
from typing import IO

from config.server.body import BodyLimits, Message, SpoolBudget, read_body, too_large

GRACE = 0.05
LIMITS = BodyLimits(grace=GRACE, min_rate=1_000_000.0, max_size=10_000, drain=0)


async def _read_with_late_chunk(budget: SpoolBudget, sent: list[Message]) -> IO[bytes] | None:
    """`read_body` fed by a receive that, like gunicorn's, waits with `asyncio.wait_for`; its
    chunk is handed over while the loop is blocked past the deadline, so the chunk and the
    timeout land in the same iteration."""
    loop = asyncio.get_running_loop()

    async def receive() -> Message:
        chunk: asyncio.Future[Message] = loop.create_future()

        def block_then_deliver() -> None:
            time.sleep(GRACE * 3)  # the loop is stuck past the deadline...
            chunk.set_result({"type": "http.request", "body": b"x", "more_body": True})

        loop.call_soon(block_then_deliver)  # ...and the chunk is ready as it wakes
        return await asyncio.wait_for(chunk, 10)

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "headers": [(b"content-length", b"100")]}
    return await read_body(
        scope, receive, send, LIMITS, limit=10_000, over_limit=too_large(10_000), budget=budget
    )


def test_a_chunk_arriving_as_the_deadline_passes_is_refused_408_and_its_bytes_released() -> None:
    budget = SpoolBudget(1_000_000)
    sent: list[Message] = []
    # A loop of its own in a thread of its own: another test in this process may have left an
    # event loop running in the main thread (asyncio.run refuses to start beside it).
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        body = pool.submit(lambda: asyncio.run(_read_with_late_chunk(budget, sent))).result(30)
    assert body is None
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 408
    assert json.loads(sent[1]["body"])["code"] == "request_timeout"
    assert budget.held == 0
