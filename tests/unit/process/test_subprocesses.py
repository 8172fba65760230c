"""caravanserai.process.subprocesses.stop_process: SIGTERM, grace, SIGKILL; returns once the process is gone."""

from __future__ import annotations

import asyncio
import sys

from caravanserai.process.subprocesses import stop_process

IGNORES_SIGTERM = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


async def test_a_process_that_exits_on_sigterm_is_not_killed() -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(60)")
    assert await stop_process(proc, grace=10) is False
    assert proc.returncode is not None and proc.returncode < 0  # ended by SIGTERM


async def test_a_process_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", IGNORES_SIGTERM, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and await proc.stdout.readline() == b"ready\n"
    assert await stop_process(proc, grace=0.2) is True
    assert proc.returncode == -9


async def test_no_process_or_an_exited_one_is_left_alone() -> None:
    assert await stop_process(None, grace=1) is False
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await proc.wait()
    assert await stop_process(proc, grace=1) is False
