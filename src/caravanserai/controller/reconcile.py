"""The reconcile contract: one method, a key in, a `Result` out.

    class MyReconciler:
        async def reconcile(self, key: str) -> Result:
            obj = informer.get(key)          # read the current state (the key carries no event)
            ...                              # make the world match it; idempotent
            return Result()                  # or Result(requeue_after=30.0)

What the controller does with the outcome (controller-runtime's rules):

* returns `Result()` → success: the key's failure count is forgotten.
* returns `Result(requeue_after=s)` → forgotten, and the key is reconciled again after `s` seconds
  (`s` ≤ 0: at once). Use it for deadlines (a TTL) and for polling external state.
* raises `caravanserai.errors.TerminalError` → logged and forgotten; not retried until the next change.
* raises anything else → logged and retried with the queue's rate limiter (5 ms · 2ⁿ, capped; a token bucket
  overall). A `Conflict` (someone wrote first) is the usual case: the retry reads the new state.

Reconciliation is level-based: the key says *which* object to look at, never *what happened*; a reconcile that
finds the object gone cleans up. The same key is never reconciled by two workers at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from caravanserai.errors import TerminalError


@dataclass(frozen=True, slots=True)
class Result:
    """The outcome of a successful reconcile: `requeue_after` seconds until the key is reconciled again, or None."""

    requeue_after: float | None = None


class Reconciler(Protocol):
    """Makes the world match the desired state of the object named by `key`."""

    async def reconcile(self, key: str) -> Result:
        """Reconcile `key` (see the module docstring for what the result and exceptions mean)."""
        ...


__all__ = ["Reconciler", "Result", "TerminalError"]
