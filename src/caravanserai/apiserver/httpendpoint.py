"""The apiserver's HTTP endpoint (`--metrics-listen`): `/metrics`, `/healthz`, `/readyz` (aiohttp).

* `/metrics`: the Prometheus text exposition (`exposition()`).
* `/healthz`: 200 `ok` while `healthy()` finds nothing wrong (liveness), 503 with the reason otherwise.
* `/readyz`: 200 `ok` once `ready()` finds nothing missing, 503 with the reason before (readiness: a load balancer
  sends no request to an apiserver that would still answer from empty caches).

One apiserver process serves its own registry and state; the supervisor of `--workers N` serves the same three
paths over its workers (`apiserver/workerendpoint.py`). Plain HTTP on `host:port`, or on a Unix socket with
`unix:PATH` (how a supervisor reaches its workers); like the gRPC port, a non-loopback address needs
`--allow-insecure` (checked here).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from caravanserai.text import addresses

log = structlog.get_logger(__name__)

Probe = Callable[[], Awaitable[str]]
"""A health or readiness check: "" when fine, else what is wrong (the 503's text)."""


def parse_listen(text: str) -> tuple[str, int] | str | None:
    """`host:port` → (host, port); `unix:PATH` → PATH; None for "off" or ""; ValueError naming the flag otherwise."""
    listen = addresses.parse_listen_or_unix(text or addresses.OFF, flag="--metrics-listen")
    return listen.path if isinstance(listen, addresses.UnixSocket) else listen


async def _fine() -> str:
    return ""


class MetricsEndpoint:
    """Serves the three paths on `listen` ("off": nothing). `port` is the TCP port it listens on after `start()`."""

    def __init__(
        self,
        exposition: Callable[[], Awaitable[bytes]],
        *,
        ready: Probe,
        healthy: Probe = _fine,
        listen: str,
        allow_insecure: bool,
    ) -> None:
        self._exposition = exposition
        self._ready = ready
        self._healthy = healthy
        self._address = parse_listen(listen)
        if isinstance(self._address, tuple) and not (addresses.is_loopback(listen) or allow_insecure):
            raise ValueError(f"refusing plain HTTP metrics on {listen}: use a loopback address, or --allow-insecure")
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> None:
        if self._address is None:
            return
        app = web.Application()
        app.router.add_get("/metrics", self._serve_metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        address = self._address
        site: web.BaseSite = (
            web.UnixSite(runner, address) if isinstance(address, str) else web.TCPSite(runner, address[0], address[1])
        )
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        if isinstance(address, tuple):
            self.port = runner.addresses[0][1]
        log.info("metrics endpoint listening", address=address if isinstance(address, str) else None,
                 host=address[0] if isinstance(address, tuple) else None, port=self.port)  # fmt: skip

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _serve_metrics(self, _request: web.Request) -> web.Response:
        body = await self._exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, _request: web.Request) -> web.Response:
        return _answer(await self._healthy(), "not healthy")

    async def _readyz(self, _request: web.Request) -> web.Response:
        return _answer(await self._ready(), "not ready")


def _answer(problem: str, what: str) -> web.Response:
    if not problem:
        return web.Response(text="ok\n")
    return web.Response(status=503, text=f"{what}: {problem}\n")


__all__ = ["MetricsEndpoint", "Probe", "parse_listen"]
