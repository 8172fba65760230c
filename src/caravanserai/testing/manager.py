"""Running a controller `Manager` in the background for the length of a test block."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from caravanserai.controller import Manager


@contextlib.asynccontextmanager
async def running(manager: Manager, *, stop_timeout: float = 10.0) -> AsyncIterator[Manager]:
    """Run `manager` as a task until the block exits, then stop it and wait up to `stop_timeout` seconds.

    Guarantees: the task is gone when the block exits (cancelled if it does not stop in time), and an error the
    manager raised while running is raised here, after the block's own exception if there is one."""
    task = asyncio.create_task(manager.run(), name="test-manager")
    try:
        yield manager
    finally:
        manager.stop()
        try:
            await asyncio.wait_for(task, stop_timeout)
        except BaseException:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]  # mypy: BaseException | None narrowed by the check above


__all__ = ["running"]
