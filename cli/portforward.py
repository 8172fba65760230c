"""`caractrl port-forward PROJECT/SERVICE [LOCAL:]REMOTE [--address 127.0.0.1]`: a local port into a container.

    caractrl port-forward shop/db 13306:3306     # 127.0.0.1:13306 → the db container's port 3306
    caractrl port-forward hello/web 8080         # the same port number on both ends
    caractrl port-forward hello/web :8080        # a free local port, printed

caractrl listens locally; each accepted connection becomes one bidirectional gRPC stream to the agent of the
project's node (`Agent.PortForward`), which dials the container's port on the project network. Connections are
independent: many at once, one failing or aborting leaves the others and the listener alone (its error is one
line on stderr). The local client closing its sending side half-closes the container's connection; the
container closing its side closes the local connection. Ctrl-C stops listening; SIGTERM too (exit 0, without a
traceback, open connections closed). Only `admin` may forward.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from collections.abc import AsyncIterator
from typing import Any

import click
import grpc

from caravanserai.api.v1 import api_pb2
from caravanserai.cli.agents import AgentConnection, connect, find_project_node, split_target
from caravanserai.cli.common import pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError
from caravanserai.text.addresses import parse_port

CHUNK = 256 * 1024  # bytes per gRPC message: fewer, larger messages move more bytes per second


def parse_ports(text: str) -> tuple[int, int]:
    """`[LOCAL:]REMOTE` → (local, remote); LOCAL empty or 0 means a free port. CommandError names the bad part."""
    local_text, sep, remote_text = text.rpartition(":")
    if not sep:
        local_text = remote_text
    remote = _port(remote_text, "remote", allow_zero=False)
    local = _port(local_text, "local", allow_zero=True) if local_text else 0
    return local, remote


def _port(text: str, what: str, *, allow_zero: bool) -> int:
    try:
        return parse_port(text, port_zero=allow_zero)
    except ValueError:
        raise CommandError(f"error: invalid {what} port {text!r}: expected 1-65535") from None


class Forwarder:
    """Serves accepted local connections over one agent connection."""

    def __init__(self, agent: AgentConnection, *, project: str, service: str, port: int, namespace: str = "") -> None:
        self.agent = agent
        self.target = api_pb2.PortForwardRequest(project=project, service=service, port=port, namespace=namespace)
        self._open: dict[asyncio.Task[None], Any] = {}  # each connection's handler and its stream
        self._closing = False

    async def close(self, *, timeout: float = 5.0) -> None:
        """Cancel every open stream and wait (up to `timeout`) for their connections to close."""
        self._closing = True
        for call in self._open.values():
            call.cancel()
        if self._open:
            await asyncio.wait(list(self._open), timeout=timeout)

    async def _requests(
        self, reader: asyncio.StreamReader, aborted: asyncio.Event, connected: asyncio.Event
    ) -> AsyncIterator[api_pb2.PortForwardRequest]:
        yield self.target
        await connected.wait()  # the agent's first (empty) answer: the container's port accepted the connection
        try:
            while chunk := await reader.read(CHUNK):
                yield api_pb2.PortForwardRequest(data=chunk)
        except (ConnectionError, OSError):  # the local client aborted: so does the remote connection
            aborted.set()
        # otherwise the local client's end of sending: the request stream ends, the agent half-closes

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy one local connection to and from its own stream; errors become one line on stderr."""
        peer = writer.get_extra_info("peername")
        aborted, connected = asyncio.Event(), asyncio.Event()
        call = self.agent.stub.PortForward(self._requests(reader, aborted, connected), metadata=self.agent.metadata)
        task = asyncio.current_task()
        assert task is not None
        self._open[task] = call
        watcher = asyncio.create_task(aborted.wait())
        watcher.add_done_callback(lambda _: call.cancel())
        try:
            async for response in call:
                connected.set()
                if response.data:
                    writer.write(response.data)
                    await writer.drain()
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                print(
                    f"{self.agent.error(exc).message} (connection from {_address(peer)})", file=sys.stderr, flush=True
                )
        except (ConnectionError, OSError):
            call.cancel()  # the local client went away: abort the remote connection
        except asyncio.CancelledError:
            if not self._closing:
                raise  # not our close(): the cancellation is someone else's
        finally:
            self._open.pop(task, None)
            watcher.cancel()
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


def _address(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


async def _serve(settings: Settings, project: str, service: str, local: int, remote: int, address: str) -> None:
    found, node = await find_project_node(settings, project, service)
    async with connect(settings, node) as agent:
        forwarder = Forwarder(agent, project=project, service=service, port=remote, namespace=found.metadata.namespace)
        try:
            server = await asyncio.start_server(forwarder.handle, address, local, reuse_address=True)
        except OSError as exc:
            raise CommandError(f"error: cannot listen on {address}:{local}: {exc.strerror or exc}") from None
        async with server:
            bound = server.sockets[0].getsockname()
            print(f"Forwarding from {_host(address)}:{bound[1]} -> {project}/{service}:{remote}", flush=True)
            await _until_terminated()
            server.close()
            await forwarder.close()  # SIGTERM: no new connections, the open ones closed


async def _until_terminated() -> None:
    """Return when the process gets SIGTERM (a service manager, `timeout`, `kill`): port-forward then exits 0
    without a traceback, as after Ctrl-C."""
    terminated = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, terminated.set)
    try:
        await terminated.wait()
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def _check_address(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    try:
        socket.getaddrinfo(value, None, flags=socket.AI_NUMERICHOST)
    except socket.gaierror:
        raise click.BadParameter(f"{value!r} is not an IP address") from None
    return value


@click.command("port-forward")
@click.argument("target", metavar="PROJECT/SERVICE")
@click.argument("ports", metavar="[LOCAL:]REMOTE")
@click.option(
    "--address", default="127.0.0.1", show_default=True, callback=_check_address, help="Local address to listen on."
)
@pass_settings
def port_forward(settings: Settings, target: str, ports: str, address: str) -> None:
    """Forward a local port to a port of a service's container."""
    project, service = split_target(target)
    local, remote = parse_ports(ports)
    run(_serve(settings, project, service, local, remote, address))


port_forward.fixed_resource = "projects"  # type: ignore[attr-defined]  # a mark read by cli/common.py with getattr; click declares no such attribute

__all__ = ["Forwarder", "parse_ports", "port_forward"]
