"""Control-plane processes for fault tests: a cara-apiserver subprocess that can be SIGKILLed and restarted on
the same address."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import dataclass, field

from caravanserai.client import Client
from caravanserai.process.subprocesses import stop_process
from caravanserai.testing import free_port


@dataclass
class ApiProcess:
    """cara-apiserver as a real process on a fixed address, so it can be SIGKILLed and restarted there."""

    etcd_endpoint: str
    prefix: str
    address: str = field(default_factory=lambda: f"127.0.0.1:{free_port()}")
    proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "caravanserai.apiserver",
            "--etcd-endpoints",
            self.etcd_endpoint,
            "--etcd-prefix",
            self.prefix,
            "--listen",
            self.address,
            "--bookmark-interval",
            "0.5",
            "--metrics-listen",
            "127.0.0.1:0",
            "--log-level",
            "warning",
            stderr=asyncio.subprocess.DEVNULL,
        )
        async with Client(self.address, retry_timeout=0, timeout=2) as c:
            for _ in range(200):
                try:
                    await c.projects.list(limit=1)
                    return
                except Exception:  # noqa: BLE001 - not serving yet
                    await asyncio.sleep(0.1)
        raise TimeoutError(f"apiserver at {self.address} did not start")

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGKILL)

    async def stop(self) -> None:
        await stop_process(self.proc, grace=10)


__all__ = ["ApiProcess"]
