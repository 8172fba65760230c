"""An in-process apiserver on a free port over a real etcd, for tests of controllers and clients."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from caravanserai.apiserver.server import ApiServer, ApiServerConfig
from caravanserai.clock import Clock


@dataclass
class RunningApiServer:
    """A started apiserver: `address` is host:port for `Client(address)`."""

    server: ApiServer
    task: asyncio.Task[None]
    address: str
    prefix: str

    async def stop(self) -> None:
        """Stop serving (as on SIGTERM) and wait until it has."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def start_apiserver(
    etcd_endpoint: str,
    *,
    prefix: str | None = None,
    listen: str = "127.0.0.1:0",
    clock: Clock | None = None,
    **config: Any,
) -> RunningApiServer:
    """Start an apiserver task and return once it serves. Each call gets its own etcd prefix unless given one."""
    prefix = prefix or f"/test-{uuid.uuid4().hex[:12]}"
    settings = {"bookmark_interval": 0.5, "compaction_interval": 0.0, "grace": 0.5, **config}
    cfg = ApiServerConfig(etcd_endpoints=[etcd_endpoint], etcd_prefix=prefix, listen=listen, **settings)
    server = ApiServer(cfg, clock=clock)
    task = asyncio.create_task(server.run(), name="test-apiserver")
    started = asyncio.create_task(server.started.wait())
    await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED, timeout=30)
    if not server.started.is_set():
        started.cancel()
        if task.done():
            task.result()  # raises the startup error
        task.cancel()
        raise TimeoutError("apiserver did not start within 30 s")
    return RunningApiServer(server, task, f"127.0.0.1:{server.port}", prefix)


@contextlib.asynccontextmanager
async def apiserver(etcd_endpoint: str, **kwargs: Any) -> AsyncIterator[RunningApiServer]:
    """`async with apiserver(etcd.endpoint) as api: Client(api.address)`."""
    running = await start_apiserver(etcd_endpoint, **kwargs)
    try:
        yield running
    finally:
        await running.stop()


__all__ = ["RunningApiServer", "apiserver", "start_apiserver"]
