"""Helpers the benchmarks share: free loopback ports, waiting for an apiserver process, process CPU time."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess

from caravanserai.client import Client


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def process_cpu(pid: int) -> float:
    """User + system CPU seconds used so far by process `pid` (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def wait_serving(address: str, proc: subprocess.Popen[bytes], *, attempts: int = 300) -> None:
    """Return once the apiserver at `address` answers a List; fail if `proc` exits or it never answers."""
    async with Client(address, retry_timeout=0) as c:
        for _ in range(attempts):
            if proc.poll() is not None:
                raise RuntimeError("cara-apiserver exited during start-up")
            try:
                await c.projects.list(limit=1)
                return
            except Exception:  # noqa: BLE001 - not up yet
                await asyncio.sleep(0.1)
    raise TimeoutError("cara-apiserver did not answer")


__all__ = ["free_port", "process_cpu", "wait_serving"]
