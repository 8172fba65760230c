"""`Agent.PortForward`: one TCP connection to a container port on the project network, as a gRPC byte stream.

Guarantees:

* The first request names project, service and port (1-65535); the agent dials the service's container on the
  project network (only this node can reach it), answers with an empty message once connected, and then copies
  bytes both ways as they come, with flow control (a slow reader holds back the writer; nothing is buffered
  without limit).
* The client ending its request stream half-closes the connection (the container reads EOF) while the
  container's answer keeps flowing; the container closing its side ends the call. Cancelling the call closes the
  connection at once.
* Refusals are `InvalidForward` (bad request), `NoEndpoint` (no running container here) or `ForwardRefused`
  (the container refused or did not accept the connection in time); the caller maps them to gRPC codes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from caravanserai.agent.docker import naming
from caravanserai.agent.ingress.endpoints import ServiceEndpoints
from caravanserai.api.v1 import api_pb2

CHUNK = 256 * 1024  # bytes per gRPC message: fewer, larger messages move more bytes per second
CONNECT_TIMEOUT = 5.0


class InvalidForward(ValueError):
    """The first request does not name a project, service and valid port."""


class ForwardRefused(ConnectionError):
    """The container's port refused the connection or did not accept it in time."""


async def first_request(requests: AsyncIterator[api_pb2.PortForwardRequest]) -> api_pb2.PortForwardRequest:
    """The opening request, checked; InvalidForward when it is missing or incomplete."""
    first = await anext(requests, None)
    if first is None:
        raise InvalidForward("the stream ended before naming a target")
    for field in ("project", "service"):
        if not getattr(first, field):
            raise InvalidForward(f"{field} is required in the first message")
    if not 1 <= first.port <= 65535:
        raise InvalidForward(f"port must be between 1 and 65535, not {first.port}")
    return first


class PortForwarder:
    """Serves PortForward streams for this node's projects."""

    def __init__(self, endpoints: ServiceEndpoints, *, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.endpoints = endpoints
        self.connect_timeout = connect_timeout

    async def _dial(self, first: api_pb2.PortForwardRequest) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        project = naming.project_in(first.namespace, first.project)
        address = await self.endpoints.address(project, first.service)
        what = f"{naming.shown(project)}/{first.service}:{first.port}"
        try:
            return await asyncio.wait_for(asyncio.open_connection(address, first.port), self.connect_timeout)
        except TimeoutError:
            raise ForwardRefused(f"{what} did not accept a connection within {self.connect_timeout:g} s") from None
        except OSError as exc:
            raise ForwardRefused(f"{what} refused the connection ({exc.strerror or exc})") from None

    async def forward(
        self, requests: AsyncIterator[api_pb2.PortForwardRequest]
    ) -> AsyncIterator[api_pb2.PortForwardResponse]:
        """The bytes read from the connection the requests open (see the module docstring)."""
        first = await first_request(requests)
        reader, writer = await self._dial(first)
        upload = asyncio.create_task(_upload(first.data, requests, writer))
        try:
            yield api_pb2.PortForwardResponse()  # connected: the client may send
            while chunk := await _read(reader):
                yield api_pb2.PortForwardResponse(data=chunk)
        finally:
            upload.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await upload
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


async def _read(reader: asyncio.StreamReader) -> bytes:
    """The next bytes from the container; b"" at its end, also when it reset the connection."""
    try:
        return await reader.read(CHUNK)
    except ConnectionError:
        return b""


async def _upload(
    data: bytes, requests: AsyncIterator[api_pb2.PortForwardRequest], writer: asyncio.StreamWriter
) -> None:
    """Client → container, then half-close when the client's stream ends."""
    if data:
        writer.write(data)
        await writer.drain()
    async for request in requests:
        if request.data:
            writer.write(request.data)
            await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()


__all__ = ["ForwardRefused", "InvalidForward", "PortForwarder", "first_request"]
