"""Hooks a `WorkQueue` calls so that its behaviour can be measured.

The queue calls them synchronously, while it changes state, so they must be cheap and must not raise (an
exception raised by a hook propagates out of the queue call that triggered it). `NoMetrics` is the default.
All durations are in seconds of the queue's `Clock.monotonic()`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol


class QueueMetrics(Protocol):
    """What a workqueue reports: adds, depth, queue latency, work duration and retries."""

    def added(self, key: Hashable) -> None:
        """`key` now needs processing. An add that collapses into a pending one is not reported."""
        ...

    def depth(self, queued: int) -> None:
        """The number of queued keys (not counting keys being processed) changed to `queued`."""
        ...

    def queue_latency(self, key: Hashable, seconds: float) -> None:
        """`key` was handed to a worker `seconds` after the add that made it need processing."""
        ...

    def work_duration(self, key: Hashable, seconds: float) -> None:
        """A worker was done with `key` `seconds` after it was handed out."""
        ...

    def retried(self, key: Hashable) -> None:
        """`key` was put back with a rate-limited delay (`add_rate_limited`)."""
        ...


class NoMetrics:
    """Measures nothing: the default `QueueMetrics`."""

    def added(self, key: Hashable) -> None:
        return None

    def depth(self, queued: int) -> None:
        return None

    def queue_latency(self, key: Hashable, seconds: float) -> None:
        return None

    def work_duration(self, key: Hashable, seconds: float) -> None:
        return None

    def retried(self, key: Hashable) -> None:
        return None


__all__ = ["NoMetrics", "QueueMetrics"]
