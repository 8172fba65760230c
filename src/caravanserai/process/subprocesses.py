"""Stopping a child process the way every Caravanserai supervisor does: SIGTERM, a grace period, then SIGKILL.

    killed = await stop_process(proc, grace=10.0)

Guarantees: returns only once the process is gone (its exit status collected); a process that has already exited
(or was never started) is left alone; a process that vanishes between the signals is not an error. The result
says whether SIGKILL was needed, so that the caller can say so in its own words.
"""

from __future__ import annotations

import asyncio
import contextlib


async def stop_process(proc: asyncio.subprocess.Process | None, *, grace: float) -> bool:
    """SIGTERM `proc`, wait up to `grace` seconds for it to exit, SIGKILL it after that; whether it was killed."""
    if proc is None or proc.returncode is not None:
        return False
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), grace)
        return False
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return True


__all__ = ["stop_process"]
