"""Time, injected: logic receives a `Clock` and never calls `time.time()` or `asyncio.sleep()` itself.

`SystemClock` is the real one. `caravanserai.testing.FakeClock` advances only when a test says so, so heartbeat
timeouts and grace periods are tested without sleeping.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import time
from typing import Protocol

from google.protobuf.timestamp_pb2 import Timestamp


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
    when = _dt.datetime.fromtimestamp(seconds(ts), tz=_dt.timezone.utc)
    return when.isoformat(timespec="seconds").replace("+00:00", "Z")


__all__ = ["Clock", "SystemClock", "rfc3339", "seconds", "timestamp"]
