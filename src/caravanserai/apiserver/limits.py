"""Overload protection: bounded in-flight requests, overall and per client.

A request over either bound is refused at once with RESOURCE_EXHAUSTED and retry advice, never queued, so a
client flood cannot stall the server and other clients keep being served (each client has its own share).
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator

from caravanserai.errors import ResourceExhausted


class InflightLimiter:
    """Counts requests in flight; `hold(client)` admits one or raises ResourceExhausted."""

    def __init__(self, *, total: int = 400, per_client: int = 100, retry_after: float = 1.0) -> None:
        self.total = total
        self.per_client = per_client
        self.retry_after = retry_after
        self._inflight = 0  # all clients; never above `total`
        self._by_client: collections.Counter[str] = collections.Counter()  # each never above `per_client`
        self.refused = 0

    @contextlib.contextmanager
    def hold(self, client: str) -> Iterator[None]:
        if self._inflight >= self.total:
            self.refused += 1
            raise ResourceExhausted(
                f"the apiserver is overloaded ({self._inflight} requests in flight); retry in {self.retry_after:g}s",
                self.retry_after,
            )
        if self._by_client[client] >= self.per_client:
            self.refused += 1
            raise ResourceExhausted(
                f"too many concurrent requests from {client} (limit {self.per_client}); retry in {self.retry_after:g}s",
                self.retry_after,
            )
        self._inflight += 1
        self._by_client[client] += 1
        try:
            yield
        finally:
            self._inflight -= 1
            self._by_client[client] -= 1
            if not self._by_client[client]:
                del self._by_client[client]


__all__ = ["InflightLimiter"]
