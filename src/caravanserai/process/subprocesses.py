"""Child processes the way every Caravanserai supervisor runs them.

    killed = await stop_process(proc, grace=10.0)
    proc = await asyncio.create_subprocess_exec(..., preexec_fn=die_with_parent(os.getpid()))
    proc = await asyncio.create_subprocess_exec(*dies_with_parent(["restic", "backup", "."]))

Guarantees: `stop_process` (SIGTERM, a grace period, then SIGKILL) returns only once the process is gone (its exit
status collected); a process that has already exited (or was never started) is left alone; a process that
vanishes between the signals is not an error. The result says whether SIGKILL was needed, so that the caller can
say so in its own words. `die_with_parent` makes a child get a signal when its parent dies, even by SIGKILL
(Linux's PR_SET_PDEATHSIG; elsewhere nothing), and exit at once if the parent is already gone when it starts; it
runs Python in the forked child, so it is only for parents with few threads (the apiserver's supervisor).
`dies_with_parent(argv)` does the same for any parent without running anything in the child: the command is run
through util-linux's `setpriv --pdeathsig KILL` (kept across exec), or as it is where there is no setpriv.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1
_SETPRIV = shutil.which("setpriv")


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


def die_with_parent(parent: int, sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A `preexec_fn` for a child of process `parent`: `sig` when the parent dies, and exit now if it already has."""

    def arrange() -> None:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent:
            os._exit(1)

    return arrange


def dies_with_parent(argv: list[str]) -> list[str]:
    """`argv` run so that it gets SIGKILL when the process that starts it dies (see the module docstring)."""
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *argv] if _SETPRIV else list(argv)


__all__ = ["die_with_parent", "dies_with_parent", "stop_process"]
