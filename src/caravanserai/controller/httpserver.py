"""A tiny asyncio HTTP/1.1 server for /healthz, /readyz and /metrics (no dependency, GET and HEAD only).

Each route is a plain function returning (status, content type, body); it runs on the event loop, so it must
be quick. Every response closes its connection. Requests must arrive within `REQUEST_TIMEOUT` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from http import HTTPStatus

import structlog

log = structlog.get_logger(__name__)

Route = Callable[[], tuple[int, str, str]]
REQUEST_TIMEOUT = 10.0
MAX_HEADER_LINES = 100
TEXT = "text/plain; charset=utf-8"


class HttpServer:
    """Serves `routes` (path → Route) on host:port (port 0: any free port, see `port` after `start`)."""

    def __init__(self, routes: Mapping[str, Route], *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._routes = dict(routes)
        self._host = host
        self._requested_port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._requested_port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("http server listening", host=self._host, port=self.port, paths=sorted(self._routes))

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(self._connections)
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> HttpServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):  # an I/O guard, not logic time
                method, path = await _read_request(reader)
            status, content_type, body = self._respond(method, path)
            writer.write(_response(status, content_type, body, include_body=method != "HEAD"))
            await writer.drain()
        except (TimeoutError, ConnectionError, ValueError, asyncio.IncompleteReadError) as exc:
            log.debug("bad http request", error=str(exc))
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _respond(self, method: str, path: str) -> tuple[int, str, str]:
        route = self._routes.get(path)
        if route is None:
            return 404, TEXT, f"no such path: {path}\n"
        if method not in ("GET", "HEAD"):
            return 405, TEXT, "only GET and HEAD are allowed\n"
        try:
            return route()
        except Exception:  # noqa: BLE001 - a failing route answers 500, the server lives on
            log.exception("http route failed", path=path)
            return 500, TEXT, "internal error\n"


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str]:
    line = (await reader.readline()).decode("latin-1").strip()
    parts = line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise ValueError(f"malformed request line {line!r}")
    for _ in range(MAX_HEADER_LINES):
        header = await reader.readline()
        if header in (b"\r\n", b"\n", b""):
            return parts[0].upper(), parts[1].split("?", 1)[0]
    raise ValueError("too many header lines")


def _response(status: int, content_type: str, body: str, *, include_body: bool) -> bytes:
    data = body.encode()
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + (data if include_body else b"")


__all__ = ["HttpServer", "Route"]
