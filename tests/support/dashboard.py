"""An in-process `cara-dashboard` on a free loopback port, for tests (HTTP clients or a real browser)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp

from caravanserai.dashboard.__main__ import DashboardProcess, parser, serve_options


@dataclass
class RunningDashboard:
    """A started dashboard: `url` is its page, e.g. http://127.0.0.1:PORT/."""

    process: DashboardProcess
    task: asyncio.Task[None]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.process.port}/"

    @property
    def token(self) -> str:
        assert self.process.access is not None
        return self.process.access.token

    @property
    def login_url(self) -> str:
        """The page with `?token=`: a browser's first visit (it sets the cookie)."""
        return f"{self.url}?token={self.token}"

    @property
    def headers(self) -> dict[str, str]:
        """The access token as a script sends it."""
        return {"Authorization": f"Token {self.token}"}

    def session(self) -> aiohttp.ClientSession:
        """An HTTP client that sends the access token with every request."""
        return aiohttp.ClientSession(headers=self.headers)


@contextlib.asynccontextmanager
async def dashboard(server: str, *extra_flags: str) -> AsyncIterator[RunningDashboard]:
    """`async with dashboard(api.address, "--read-only") as d:` — started with the flags of cara-dashboard;
    stopped (as on SIGTERM) when the block ends."""
    opts = parser().parse_args(["--server", server, "--listen", "127.0.0.1:0", *extra_flags])
    process = DashboardProcess(opts, serve_options(opts))
    task = asyncio.create_task(process.run(), name="test-dashboard")
    started = asyncio.create_task(process.started.wait())
    try:
        await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED, timeout=30)
        if task.done():
            task.result()  # raises the start-up error
        if not process.started.is_set():
            raise TimeoutError("the dashboard did not start within 30 s")
        yield RunningDashboard(process, task)
    finally:
        started.cancel()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


__all__ = ["RunningDashboard", "dashboard"]
