"""`caractrl logs PROJECT[/SERVICE]`: container output, streamed from the agent of the project's node.

    caractrl logs web                 # every service; lines prefixed `[service] ` when there are several
    caractrl logs web/api -f          # one service, following
    caractrl logs web -c api --tail 20 --timestamps

The API server does not relay logs: caractrl reads the project's `status.nodeRef`, the node's address
(`status.network.addresses`: InternalIP, then ExternalIP, then Hostname) and `status.network.agentPort`, and
calls `caravanserai.v1.Agent/Logs` there with the same TLS settings and token as for the API server.
"""

from __future__ import annotations

import ipaddress
import sys
from typing import IO

import click
import grpc

from caravanserai import v1
from caravanserai.api.v1 import api_pb2_grpc
from caravanserai.errors import Unavailable
from caravanserai.grpcstatus import from_rpc_error

from caravanserai.cli.common import complete_names, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError
from caravanserai.cli.resources import get_object
from caravanserai.cli.tables import node_address, project_reason


def agent_target(node: v1.Node) -> str:
    """`host:port` of the node's agent; CommandError when the node does not publish one."""
    name = node.metadata.name
    address = node_address(node)
    if not address:
        raise CommandError(f'error: node "{name}" publishes no address (status.network.addresses is empty)')
    port = node.status.network.agent_port
    if not port:
        raise CommandError(f'error: node "{name}" publishes no agent port (status.network.agentPort is 0)')
    try:
        if ipaddress.ip_address(address).version == 6:
            address = f"[{address}]"
    except ValueError:
        pass  # a host name
    return f"{address}:{port}"


def check_scheduled(project: v1.Project, service: str) -> None:
    """Refuse projects not bound to a node and services the project does not have."""
    name = project.metadata.name
    if not project.status.node_ref:
        cond = project_reason(project)
        why = f": {cond.message}" if cond is not None and cond.message else ""
        raise CommandError(f'error: project "{name}" is not on a node (phase {project.status.phase}){why}')
    services = [s.name for s in project.spec.services]
    if service and service not in services:
        raise CommandError(f'error: project "{name}" has no service "{service}" (services: {", ".join(services)})')


def agent_error(exc: grpc.aio.AioRpcError, node: str, target: str) -> CommandError:
    """The one line for a failed Logs call."""
    err = from_rpc_error(exc, target=target)
    if isinstance(err, Unavailable):
        return CommandError(f"error: cannot reach the agent of node/{node} at {target}: {exc.details() or exc.code().name}")
    return CommandError(f"Error from agent ({type(err).__name__}): {err.message}")


def _open_channel(settings: Settings, target: str) -> grpc.aio.Channel:
    credentials = settings.credentials()
    if credentials is not None:
        return grpc.aio.secure_channel(target, credentials)
    return grpc.aio.insecure_channel(target)


async def stream_logs(
    settings: Settings, node: v1.Node, request: v1.LogsRequest, *, prefix: bool, out: IO[str]
) -> None:
    """Call Logs on the agent of `node` and copy the lines to `out` (`[service] ` first when `prefix`)."""
    target = agent_target(node)
    token = settings.bearer_token()
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    async with _open_channel(settings, target) as channel:
        call = api_pb2_grpc.AgentStub(channel).Logs(request, metadata=metadata)
        try:
            async for line in call:
                text = line.data.decode("utf-8", errors="replace").rstrip("\n")
                out.write(f"[{line.service}] {text}\n" if prefix else f"{text}\n")
                if request.follow:
                    out.flush()
        except grpc.aio.AioRpcError as exc:
            raise agent_error(exc, node.metadata.name, target) from exc
        finally:
            out.flush()


async def _logs(settings: Settings, request: v1.LogsRequest) -> None:
    async with settings.client() as client:
        project = await get_object(client.projects, request.project)
        check_scheduled(project, request.service)
        node = await get_object(client.nodes, project.status.node_ref)
    prefix = not request.service and len(project.spec.services) > 1
    await stream_logs(settings, node, request, prefix=prefix, out=sys.stdout)


@click.command("logs")
@click.argument("target", metavar="PROJECT[/SERVICE]", shell_complete=complete_names)
@click.option("-c", "--service", default="", help="Only this service (same as PROJECT/SERVICE).")
@click.option("-f", "--follow", is_flag=True, help="Keep streaming new output.")
@click.option("--tail", type=int, default=-1, show_default=True, help="Lines to show from the end; -1 for all.")
@click.option("--timestamps", is_flag=True, help="Prefix each line with its RFC 3339 time.")
@pass_settings
def logs(settings: Settings, target: str, service: str, follow: bool, tail: int, timestamps: bool) -> None:
    """Print the container output of a project's services."""
    project, _, from_target = target.partition("/")
    if from_target and service and from_target != service:
        raise click.UsageError(f"service given twice: {from_target!r} and {service!r}")
    if not project:
        raise click.UsageError("PROJECT must not be empty")
    service = from_target or service
    run(_logs(settings, v1.LogsRequest(project=project, service=service, follow=follow, tail=tail, timestamps=timestamps)))


# a mark on the click command, read by cli/common.py with getattr (click declares no such attribute)
logs.fixed_resource = "projects"  # type: ignore[attr-defined]

__all__ = ["agent_error", "agent_target", "check_scheduled", "logs", "stream_logs"]
