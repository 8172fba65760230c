"""Events expire after one hour through etcd leases, shared so that a burst of events costs few lease grants."""

from __future__ import annotations

import asyncio

from caravanserai.clock import Clock
from caravanserai.storage import Store

EVENT_TTL_SECONDS = 3600


class EventLeases:
    """Hands out an etcd lease for new Events: one lease is reused for `reuse_seconds`, and granted with that much
    extra TTL, so every event lives at least `ttl_seconds` and at most `ttl_seconds + reuse_seconds`."""

    def __init__(self, store: Store, *, clock: Clock, ttl_seconds: int = EVENT_TTL_SECONDS, reuse_seconds: int = 60):
        self._store = store
        self._clock = clock
        self._ttl = ttl_seconds
        self._reuse = reuse_seconds
        self._lease = 0
        self._granted_at = float("-inf")
        self._lock = asyncio.Lock()  # one grant at a time; waiters reuse its result

    async def current(self) -> int:
        async with self._lock:
            now = self._clock.monotonic()
            if now - self._granted_at >= self._reuse:
                self._lease = await self._store.grant_lease(self._ttl + self._reuse)
                self._granted_at = now
            return self._lease


__all__ = ["EVENT_TTL_SECONDS", "EventLeases"]
