"""One process of the fleet, run inside a host's network namespace, that a test may kill, stop or restart.

* Started with `nsenter --net=/run/netns/<ns> -- argv…` (only the network namespace changes: `ip netns exec`
  would also remount /sys, which breaks dockerd's cgroups). nsenter execs the program, so the pid is the
  program's own.
* The process dies with the test run: it gets SIGKILL when the process that started it ends (`setpriv
  --pdeathsig KILL`, kept across the execs), so an interrupted run leaves nothing running. No Python code runs
  between fork and exec (no `preexec_fn`): the child is spawned with vfork, so gRPC's fork handlers never run in
  it (with gRPC threads busy in the test process they abort the child). stdout and stderr go to a log file
  (`log_tail()`).
* `start()` after `kill()`/`stop()` runs the same command again (same addresses, same data).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

_DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []


class HostProcess:
    """A command in a network namespace (or the root one when `netns` is None); see the module docstring."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log_path: Path,
        netns: str | None = None,
        env: Mapping[str, str] | None = None,
        stop_timeout: float = 10.0,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.netns = netns
        self.env = dict(env) if env is not None else None
        self.stop_timeout = stop_timeout
        self.starts = 0  # how many times it was started
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def command(self) -> list[str]:
        """The full command line, setpriv and nsenter included."""
        if self.netns is None:
            return [*_DIE_WITH_PARENT, *self.argv]
        return [*_DIE_WITH_PARENT, "nsenter", f"--net=/run/netns/{self.netns}", "--", *self.argv]

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def start(self) -> None:
        """Start the command (no-op while it runs)."""
        if self.running:
            return
        self.starts += 1
        env = None if self.env is None else {**os.environ, **self.env}
        with open(self.log_path, "ab") as log:
            log.write(f"--- start {self.starts}: {' '.join(self.command)}\n".encode())
            log.flush()
            self._proc = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
            )

    def signal(self, sig: signal.Signals) -> None:
        if self.running and self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._proc.pid, sig)

    def pause(self) -> None:
        """SIGSTOP: the process is frozen, its sockets stay open."""
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    async def kill(self) -> None:
        """SIGKILL and wait until it is gone (no cleanup of any kind runs)."""
        if self._proc is not None:
            self.signal(signal.SIGKILL)
            await self._proc.wait()

    async def stop(self) -> None:
        """SIGCONT (in case it is paused), SIGTERM, and SIGKILL after `stop_timeout`."""
        if not self.running or self._proc is None:
            return
        self.resume()
        self.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self._proc.wait(), self.stop_timeout)
        except TimeoutError:
            await self.kill()

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


__all__ = ["HostProcess"]
