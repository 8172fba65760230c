"""Deadlines measured on an injected `Clock` (asyncio.timeout measures the event loop's time, which a
`FakeClock` does not move)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from caravanserai.clock import Clock

R = TypeVar("R")


async def run_within(clock: Clock, coro: Coroutine[Any, Any, R], timeout: float) -> R:
    """Await `coro` for at most `timeout` seconds of `clock`; raise TimeoutError (after cancelling it) otherwise.

    A `timeout` ≤ 0 still starts `coro` and gives it one turn of the event loop. If the caller is cancelled,
    `coro` is cancelled too and has finished when the CancelledError propagates.
    """
    work = asyncio.ensure_future(coro)
    timer = asyncio.ensure_future(clock.sleep(timeout))
    try:
        await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (work, timer):
            task.cancel()
        await asyncio.wait({work, timer})
    if work.cancelled():
        raise TimeoutError(f"not done within {timeout:g}s")
    return work.result()


__all__ = ["run_within"]
