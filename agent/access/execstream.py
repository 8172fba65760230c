"""`Agent.Exec`: run a command in a service's container (Docker exec) over one bidirectional gRPC stream.

Guarantees:

* The first request is an `ExecStart` naming project, service and a non-empty command; the command runs in that
  service's running container on this node, with the given environment, working directory, stdin and TTY.
* Output is sent as it comes, stdout and stderr apart (merged into stdout with a TTY); the last message is the
  exit code, sent once the output has ended.
* Later requests feed stdin (with `stdin` only), end it (`stdin_eof`, or the client ending its stream), or
  resize the TTY. When the output ends the call ends, whatever the client still sends.
* Refusals are `InvalidExec` (bad request) or `NoEndpoint` (no running container here); Docker failures are
  `DockerError`s.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from caravanserai.agent.docker import execapi, naming
from caravanserai.agent.docker.records import ExecOptions
from caravanserai.agent.ingress.endpoints import ServiceEndpoints
from caravanserai.api.v1 import api_pb2


class InvalidExec(ValueError):
    """The first request is not a complete ExecStart."""


def exec_options(start: api_pb2.ExecStart) -> ExecOptions:
    """The Docker exec options for `start`; InvalidExec names the missing or bad field."""
    for field in ("project", "service"):
        if not getattr(start, field):
            raise InvalidExec(f"start.{field} is required")
    if not start.command or not start.command[0]:
        raise InvalidExec("start.command must name a program")
    bad = [e for e in start.env if "=" not in e or e.startswith("=")]
    if bad:
        raise InvalidExec(f"start.env: {bad[0]!r} is not KEY=VALUE")
    return ExecOptions(
        command=tuple(start.command),
        env=tuple(start.env),
        workdir=start.workdir,
        stdin=start.stdin,
        tty=start.tty,
        width=start.size.width,
        height=start.size.height,
    )


class ExecRunner:
    """Serves Exec streams for this node's projects."""

    def __init__(self, endpoints: ServiceEndpoints) -> None:
        self.endpoints = endpoints

    async def run(self, requests: AsyncIterator[api_pb2.ExecRequest]) -> AsyncIterator[api_pb2.ExecResponse]:
        """Output, then the exit code, of the command the requests start (see the module docstring)."""
        first = await anext(requests, None)
        if first is None or first.WhichOneof("request") != "start":
            raise InvalidExec("the first message must be an ExecStart")
        options = exec_options(first.start)
        project = naming.project_in(first.start.namespace, first.start.project)
        container = await self.endpoints.container(project, first.start.service)
        async with execapi.attach(self.endpoints.runtime, container.container_id, options) as session:
            feeder = asyncio.create_task(_feed(requests, session))
            try:
                while (chunk := await session.read()) is not None:
                    if chunk.stream == "stderr":
                        yield api_pb2.ExecResponse(stderr=chunk.data)
                    else:
                        yield api_pb2.ExecResponse(stdout=chunk.data)
            finally:
                feeder.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await feeder
            yield api_pb2.ExecResponse(exit_code=await session.exit_code())


async def _feed(requests: AsyncIterator[api_pb2.ExecRequest], session: execapi.ExecSession) -> None:
    """Client → command: stdin bytes, stdin's end, resizes; the end of the client's stream ends stdin."""
    async for request in requests:
        kind = request.WhichOneof("request")
        if kind == "stdin":
            await session.write(request.stdin)
        elif kind == "stdin_eof":
            await session.close_stdin()
        elif kind == "resize":
            await session.resize(width=request.resize.width, height=request.resize.height)
    await session.close_stdin()


__all__ = ["ExecRunner", "InvalidExec", "exec_options"]
