"""What a ProjectSet's last step is still waiting to see in the informer cache (client-go's controller
expectations).

The controller plans on its cache. After it creates or deletes replicas, a reconcile can run (the set's own
status write triggers one) before the cache has seen those writes; planning then would create the same replicas
twice. So each step records the keys (`meta.key_of`) it created and deleted, and the set is not planned again until
the cache shows every created key and no deleted one still active — or until `timeout` seconds passed (a lost watch
event must not stall the set forever; the informer's relist repairs the cache).

Guarantees: `pending` is False for a set without expectations; `forget` drops a set's record (the set is gone).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class _Expected:
    created: frozenset[str]
    deleted: frozenset[str]
    since: float


class Expectations:
    """Per set: the replicas created and deleted by its last step, until the cache shows them."""

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._timeout = timeout
        self._sets: dict[str, _Expected] = {}

    def expect(self, key: str, *, created: Collection[str], deleted: Collection[str], now: float) -> None:
        if created or deleted:
            self._sets[key] = _Expected(frozenset(created), frozenset(deleted), now)

    def pending(self, key: str, active: Callable[[str], bool], *, now: float) -> bool:
        """Whether the set still waits: a created name not `active` in the cache, or a deleted one still active."""
        expected = self._sets.get(key)
        if expected is None:
            return False
        waiting = any(not active(n) for n in expected.created) or any(active(n) for n in expected.deleted)
        if waiting and now - expected.since < self._timeout:
            return True
        del self._sets[key]
        return False

    def forget(self, key: str) -> None:
        self._sets.pop(key, None)


__all__ = ["DEFAULT_TIMEOUT", "Expectations"]
