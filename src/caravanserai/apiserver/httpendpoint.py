"""The apiserver's HTTP endpoint (`--metrics-listen`): `/metrics`, `/healthz`, `/readyz` (aiohttp).

* `/metrics`: the Prometheus text exposition of `ApiMetrics`.
* `/healthz`: 200 `ok` while the process serves HTTP at all (liveness).
* `/readyz`: 200 `ok` once every watch cache is filled and the gRPC server accepts calls, 503 before (readiness:
  a load balancer sends no request to an apiserver that would still answer from empty caches).

Plain HTTP; like the gRPC port, a non-loopback address needs `--allow-insecure` (checked by the caller).
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from caravanserai.apiserver.metrics import ApiMetrics
from caravanserai.tls import is_loopback

log = structlog.get_logger(__name__)

OFF = ("", "off")


def parse_listen(text: str) -> tuple[str, int] | None:
    """`host:port` → (host, port); None for "off" or ""; ValueError naming the flag otherwise."""
    if text in OFF:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--metrics-listen: {text!r} is not host:port (or off)")
    return host.strip("[]"), int(port)


class MetricsEndpoint:
    """Serves the three paths on `listen` ("off": nothing). `port` is the bound port after `start()`."""

    def __init__(self, metrics: ApiMetrics, *, ready: Callable[[], bool], listen: str, allow_insecure: bool) -> None:
        self._metrics = metrics
        self._ready = ready
        self._address = parse_listen(listen)
        if self._address is not None and not (is_loopback(listen) or allow_insecure):
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
        host, port = self._address
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        log.info("metrics endpoint listening", host=host, port=self.port)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _serve_metrics(self, _request: web.Request) -> web.Response:
        body = self._metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _request: web.Request) -> web.Response:
        if self._ready():
            return web.Response(text="ok\n")
        return web.Response(status=503, text="not ready: the watch caches are still filling\n")


__all__ = ["MetricsEndpoint", "parse_listen"]
