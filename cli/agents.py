"""Reaching the agent of a project's node for `exec` and `port-forward` (`logs` goes through the library's
`agent_logs`): the project must be Running, the service must exist, and the agent is found and dialled as
`caravanserai.client.agentlogs` does it, with the CLI's TLS settings and bearer token.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc

from caravanserai import v1
from caravanserai.api.v1 import api_pb2_grpc
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError
from caravanserai.cli.resources import get_object
from caravanserai.cli.tables import project_reason
from caravanserai.client.agentlogs import agent_channel, bearer_metadata
from caravanserai.client.agentlogs import agent_error as library_agent_error
from caravanserai.errors import FailedPrecondition, Forbidden, Unauthenticated, Unavailable


def check_service(project: v1.Project, service: str) -> None:
    """Refuse a service the project does not have."""
    services = [s.name for s in project.spec.services]
    if service and service not in services:
        name = project.metadata.name
        raise CommandError(f'error: project "{name}" has no service "{service}" (services: {", ".join(services)})')


def check_running(project: v1.Project, service: str) -> None:
    """Refuse a project that is not Running (its containers may not exist) and a service it does not have."""
    check_service(project, service)
    if project.status.phase != v1.RUNNING:
        cond = project_reason(project)
        why = f": {cond.message}" if cond is not None and cond.message else ""
        name = project.metadata.name
        raise CommandError(f'error: project "{name}" is not Running (phase {project.status.phase or "Pending"}){why}')


def agent_error(exc: grpc.aio.AioRpcError, node: str, target: str) -> CommandError:
    """The one line for a failed call to an agent."""
    if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
        return CommandError(f"error: the agent of node/{node} at {target} does not serve this (upgrade it)")
    err = library_agent_error(exc, node, target)
    if isinstance(err, Unavailable):
        return CommandError(f"error: {err.message}")
    if isinstance(err, (Forbidden, Unauthenticated)):
        return CommandError(f"error: the agent of node/{node} refused: {err.message}")
    return CommandError(f"Error from agent ({type(err).__name__}): {err.message}")


@dataclass(frozen=True, slots=True)
class AgentConnection:
    """An open channel to the agent of the node running a project, and what errors should name."""

    stub: api_pb2_grpc.AgentAsyncStub
    metadata: tuple[tuple[str, str], ...]
    node: str
    target: str

    def error(self, exc: grpc.aio.AioRpcError) -> CommandError:
        return agent_error(exc, self.node, self.target)


async def find_project_node(settings: Settings, project_name: str, service: str) -> tuple[v1.Project, v1.Node]:
    """The Running project (with `service`) and its node, from the API server; CommandError otherwise."""
    async with settings.client() as client:
        project = await get_object(client.projects, project_name)
        check_running(project, service)
        node = await get_object(client.nodes, project.status.node_ref)
    return project, node


@contextlib.asynccontextmanager
async def connect(settings: Settings, node: v1.Node) -> AsyncIterator[AgentConnection]:
    """A connection to the agent of `node`, closed on exit."""
    try:
        channel, target = agent_channel(node, credentials=settings.credentials())
    except FailedPrecondition as err:
        raise CommandError(f"error: {err.message}") from err
    async with channel:
        metadata = bearer_metadata(settings.bearer_token())
        yield AgentConnection(api_pb2_grpc.AgentStub(channel), metadata, node.metadata.name, target)


def split_target(target: str) -> tuple[str, str]:
    """PROJECT/SERVICE → (project, service); CommandError when either is missing."""
    project, sep, service = target.partition("/")
    if not project or not sep or not service or "/" in service:
        raise CommandError(f"error: expected PROJECT/SERVICE, not {target!r}")
    return project, service


__all__ = [
    "AgentConnection",
    "agent_error",
    "check_running",
    "check_service",
    "connect",
    "find_project_node",
    "split_target",
]
