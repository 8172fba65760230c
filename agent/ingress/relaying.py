"""Bytes between a client and a backend: the streamed request body and the WebSocket pump of the ingress proxy.

* `RequestBody` streams the client's body as it comes, stops at the size limit or after `timeout` seconds without
  a byte, says why in `failure`, and says whether any byte was read (`started`: after that the request cannot be
  sent to another backend).
* `pump_websockets` copies messages both ways until either side closes, then closes the other.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

CHUNK = 64 * 1024


class BodyTooLarge(Exception):
    """The request body grew past the limit."""


class BodyTooSlow(Exception):
    """No byte of the request body came in time."""


class RequestBody:
    """The request body as it comes, for the upstream request. `failure` says why it stopped early: over `limit`
    bytes (BodyTooLarge) or no byte for `timeout` seconds (BodyTooSlow); aiohttp wraps what the body raises in
    its own errors, so the proxy reads the reason here."""

    def __init__(self, content: aiohttp.StreamReader, limit: int, timeout: float) -> None:
        self._content = content
        self._limit = limit
        self._timeout = timeout
        self.failure: Exception | None = None
        self.started = False  # a byte was read (and sent on): the request can no longer go to another backend

    async def chunks(self) -> AsyncIterator[bytes]:
        seen = 0
        self.started = True
        while True:
            try:
                async with asyncio.timeout(self._timeout):
                    chunk = await self._content.read(CHUNK)
            except TimeoutError:
                self.failure = BodyTooSlow()
                raise self.failure from None
            if not chunk:
                return
            seen += len(chunk)
            if self._limit and seen > self._limit:
                self.failure = BodyTooLarge()
                raise self.failure
            yield chunk


async def _copy_messages(
    source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
) -> None:
    """Copy messages from `source` to `sink` until `source` closes; then close `sink` with the same code."""
    async for message in source:
        if message.type == aiohttp.WSMsgType.TEXT:
            await sink.send_str(message.data)
        elif message.type == aiohttp.WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        elif message.type == aiohttp.WSMsgType.PING:
            await sink.ping(message.data)
        elif message.type == aiohttp.WSMsgType.PONG:
            await sink.pong(message.data)
    await sink.close(code=source.close_code or aiohttp.WSCloseCode.OK)


async def pump_websockets(client: web.WebSocketResponse, upstream: aiohttp.ClientWebSocketResponse) -> None:
    """Both directions at once; when either side closes, the other is closed too."""
    tasks = [
        asyncio.create_task(_copy_messages(client, upstream)),
        asyncio.create_task(_copy_messages(upstream, client)),
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.close()
        await upstream.close()


__all__ = ["CHUNK", "BodyTooLarge", "BodyTooSlow", "RequestBody", "pump_websockets"]
