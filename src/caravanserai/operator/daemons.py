"""Daemons: one long-running coroutine per object and daemon handler (kopf's daemons).

Guarantees: a daemon starts at the first reconcile that finds its object (not being deleted, its filters
passing) and is cancelled when the object is deleted or gone, when the filters stop passing, and when the
controller stops (losing the lease, shutdown). Its outcome: returning ends it (until the operator restarts);
`TemporaryError(delay=s)` or `Requeue(after=s)` restarts it after `s` seconds; `PermanentError` ends it; any other
exception is logged with its traceback and restarts it after `Handler.initial_delay` seconds (default 10).
A daemon's `ctx.obj` is the object when it started and its `ctx.status` is not written: it reads and writes
through `ctx.client`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from caravanserai.clock import Clock
from caravanserai.operator.context import Context
from caravanserai.operator.handlers import Handler, call

log = structlog.get_logger(__name__)


class Daemons:
    """The running daemon tasks of one operator, by (object key, handler id)."""

    def __init__(self, operator: str, clock: Clock) -> None:
        self._operator = operator
        self._clock = clock
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}

    def running(self, name: str) -> list[str]:
        """The ids of the daemons running for the object of key `name` (`meta.key_of`)."""
        return sorted(hid for (n, hid), task in self._tasks.items() if n == name and not task.done())

    def ensure(self, handler: Handler, ctx: Context[Any]) -> None:
        """Start `handler` for the object `ctx.key` unless it runs (or ended) already."""
        key = (ctx.key, handler.id)
        if key not in self._tasks:
            self._tasks[key] = asyncio.create_task(self._run(handler, ctx), name=f"daemon-{handler.id}-{ctx.key}")

    async def stop(self, name: str, handler_id: str | None = None) -> None:
        """Cancel the daemons of the object of key `name` (only `handler_id`, when given) and wait for them."""
        keys = [k for k in self._tasks if k[0] == name and handler_id in (None, k[1])]
        await self._cancel(keys)

    async def stop_all(self) -> None:
        await self._cancel(list(self._tasks))

    async def _cancel(self, keys: list[tuple[str, str]]) -> None:
        tasks = [self._tasks.pop(k) for k in keys]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def _run(self, handler: Handler, ctx: Context[Any]) -> None:
        logger = log.bind(operator=self._operator, daemon=handler.id, object=ctx.key)
        while True:
            try:
                outcome = await call(handler, ctx, operator=self._operator)
            except Exception:  # noqa: BLE001 - a daemon's bug is logged and the daemon restarted
                logger.exception("daemon failed; restarting", after=handler.initial_delay or 10.0)
                await self._clock.sleep(handler.initial_delay or 10.0)
                continue
            if outcome.retry_after is None:
                logger.info("daemon ended")
                return
            await self._clock.sleep(outcome.retry_after)


__all__ = ["Daemons"]
