"""Overload protection: capped in-flight requests, overall and per client.

A request over either cap is refused at once with RESOURCE_EXHAUSTED and retry advice, never queued, so a
client flood cannot stall the server and other clients keep being served (each client has its own share).
"""

from __future__ import annotations

import collections

from caravanserai.errors import ResourceExhausted


class InflightLimiter:
    """Counts requests in flight; `admit(client)` lets one in or raises ResourceExhausted, `release(client)` ends it."""

    def __init__(self, *, total: int = 400, per_client: int = 100, retry_after: float = 1.0) -> None:
        self.total = total
        self.per_client = per_client
        self.retry_after = retry_after
        self._inflight = 0  # all clients; never above `total`
        self._by_client: collections.Counter[str] = collections.Counter()  # each never above `per_client`
        self.refused = 0

    @property
    def inflight(self) -> int:
        """Requests admitted and not yet released."""
        return self._inflight

    def admit(self, client: str) -> None:
        """Count one request of `client` in flight, or raise ResourceExhausted (counted as refused). Every admitted
        request is `release`d exactly once (callers: `try`/`finally`)."""
        if self._inflight >= self.total:
            self.refused += 1
            raise ResourceExhausted(
                f"the apiserver is overloaded ({self._inflight} requests in flight); retry in {self.retry_after:g}s",
                self.retry_after,
            )
        by_client = self._by_client
        if by_client[client] >= self.per_client:
            self.refused += 1
            raise ResourceExhausted(
                f"too many concurrent requests from {client} (limit {self.per_client}); retry in {self.retry_after:g}s",
                self.retry_after,
            )
        self._inflight += 1
        by_client[client] += 1

    def release(self, client: str) -> None:
        """The end of a request `admit` let in."""
        self._inflight -= 1
        left = self._by_client[client] - 1
        if left:
            self._by_client[client] = left
        else:
            del self._by_client[client]


__all__ = ["InflightLimiter"]
