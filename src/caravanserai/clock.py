"""Time, injected: logic receives a `Clock` and never calls `time.time()` or `asyncio.sleep()` itself.

`SystemClock` is the real one. `caravanserai.testing.FakeClock` advances only when a test says so, so heartbeat
timeouts and grace periods are tested without sleeping. `run_within` is the one deadline measured on a `Clock`
(asyncio.timeout measures the event loop's time, which a `FakeClock` does not move).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import time
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

R = TypeVar("R")


class Clock(Protocol):
    """What logic may ask of time."""

    def now(self) -> float:
        """Wall-clock time in seconds since the epoch (for timestamps stored in objects)."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds (for measuring intervals within one process)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` of this clock's time."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


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


def timestamp(seconds: float) -> Timestamp:
    """A protobuf Timestamp for `seconds` since the epoch."""
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def seconds(ts: Timestamp) -> float:
    """Seconds since the epoch of a protobuf Timestamp (0.0 for an unset one)."""
    return ts.seconds + ts.nanos / 1e9


def rfc3339(ts: Timestamp) -> str:
    """RFC 3339 text of a Timestamp in UTC, e.g. 2026-11-29T12:00:00Z."""
    when = _dt.datetime.fromtimestamp(seconds(ts), tz=_dt.UTC)
    return when.isoformat(timespec="seconds").replace("+00:00", "Z")


__all__ = ["Clock", "SystemClock", "rfc3339", "run_within", "seconds", "timestamp"]
