"""The restore of one snapshot into a directory, with progress.

    size = await restore_snapshot(restic, snapshot_id, target, clock=clock, on_progress=report)

Guarantees:

* **Progress** is the size of the target directory (bytes of its regular files, symlinks not followed), measured
  every `interval` seconds while restic runs and handed to `on_progress`; a failing `on_progress` (an API that
  does not answer) is logged and never stops the restore.
* **Nothing outlives it.** When the restore fails, times out or the caller is cancelled, restic is stopped
  (`Restic` does) and the progress reports stop before the error or cancellation propagates.
* Returns the bytes restored (the target's size at the end).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable

import structlog

from caravanserai.agent.volumes.restic import Restic
from caravanserai.clock import Clock
from caravanserai.errors import CaravanseraiError

log = structlog.get_logger(__name__)

PROGRESS_INTERVAL = 1.0


def directory_size(path: str) -> int:
    """Bytes of the regular files below `path` (symlinks not followed; files vanishing meanwhile skipped)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(root, name))
                if not os.path.islink(os.path.join(root, name)):
                    total += info.st_size
    return total


async def restore_snapshot(
    restic: Restic,
    snapshot_id: str,
    target: str,
    *,
    clock: Clock,
    on_progress: Callable[[int], Awaitable[None]],
    interval: float = PROGRESS_INTERVAL,
) -> int:
    """Restore `snapshot_id` into `target`, reporting progress; the bytes restored. `ResticError` on failure."""
    work = asyncio.ensure_future(restic.restore(snapshot_id, target))
    try:
        while not work.done():
            ticker = asyncio.ensure_future(clock.sleep(interval))
            await asyncio.wait({work, ticker}, return_when=asyncio.FIRST_COMPLETED)
            ticker.cancel()
            if not work.done():
                await _report(target, on_progress)
        await work
    finally:
        if not work.done():
            work.cancel()
            await asyncio.wait({work})
    return await asyncio.to_thread(directory_size, target)


async def _report(target: str, on_progress: Callable[[int], Awaitable[None]]) -> None:
    done = await asyncio.to_thread(directory_size, target)
    try:
        await on_progress(done)
    except CaravanseraiError as exc:
        log.warning("restore progress not recorded", target=target, error=str(exc))


__all__ = ["PROGRESS_INTERVAL", "directory_size", "restore_snapshot"]
