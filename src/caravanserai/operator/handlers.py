"""The registered handlers and how one call of a handler turns into an outcome.

`call` never lets a `Requeue`, `TemporaryError` or `PermanentError` out: they become an `Outcome` and one log
line. Any other exception propagates (a bug: the controller logs its traceback and retries with backoff).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from caravanserai.operator.context import Context
from caravanserai.operator.errors import PermanentError, Requeue, TemporaryError
from caravanserai.operator.filters import Filter

log = structlog.get_logger(__name__)

HandlerFn = Callable[[Context[Any]], Awaitable[Requeue | None]]
Interval = float | Callable[[Any], float]


@dataclass(frozen=True, slots=True)
class Handler:
    """A change handler (create, update, resume, delete) or a timer/daemon: `id` names it in logs and progress."""

    reason: str
    id: str
    fn: HandlerFn
    when: Filter
    interval: Interval = 0.0  # timers: seconds between runs (a number or a function of the object)
    initial_delay: float = 0.0  # timers: seconds from the first reconcile to the first run; daemons: restart pause

    def interval_of(self, obj: Any) -> float:
        value = self.interval(obj) if callable(self.interval) else self.interval
        return max(float(value), 0.0)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a call went: `done` (success or given up), `retry_after` seconds when it must run again."""

    done: bool
    retry_after: float | None = None
    failed: bool = False  # gave up (PermanentError)


async def call(handler: Handler, ctx: Context[Any], *, operator: str) -> Outcome:
    """Call `handler` with `ctx`; the outcome (see the module docstring)."""
    logger = log.bind(operator=operator, handler=handler.id, reason=handler.reason, object=ctx.key)
    try:
        result = await handler.fn(ctx)
    except TemporaryError as exc:
        logger.warning("handler failed temporarily; retrying", error=str(exc), retry_after=exc.delay)
        return Outcome(done=False, retry_after=exc.delay)
    except PermanentError as exc:
        logger.error("handler failed permanently; not retrying", error=str(exc))
        return Outcome(done=True, failed=True)
    if isinstance(result, Requeue):
        logger.debug("handler asked to run again", after=result.after)
        return Outcome(done=False, retry_after=result.after)
    return Outcome(done=True)


__all__ = ["Handler", "HandlerFn", "Interval", "Outcome", "call"]
