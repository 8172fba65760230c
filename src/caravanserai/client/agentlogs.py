"""Container logs, streamed from the agent of a project's node (`caravanserai.v1.Agent/Logs`).

The API server does not relay logs: a client reads the project's `status.nodeRef`, the node's address
(`status.network.addresses`: InternalIP, then ExternalIP, then Hostname) and `status.network.agentPort`, and calls
the agent there with the same TLS settings and token as for the API server. caractrl and the dashboard both go
through `agent_logs`.

Errors are ours: a node that publishes no address or port is `FailedPrecondition`; an agent that cannot be reached
is `Unavailable` naming the node and address; what the agent refuses keeps its own class (NotFound …).
"""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncGenerator

import grpc

from caravanserai import v1
from caravanserai.api.v1 import api_pb2_grpc
from caravanserai.errors import ApiError, FailedPrecondition, Unavailable
from caravanserai.grpcstatus import from_rpc_error


def node_address(node: v1.Node) -> str:
    """The address to reach a node at: InternalIP first, then ExternalIP, then Hostname; "" when none."""
    by_type = {a.type: a.address for a in reversed(node.status.network.addresses) if a.address}
    for wanted in ("InternalIP", "ExternalIP", "Hostname"):
        if wanted in by_type:
            return by_type[wanted]
    return next((a.address for a in node.status.network.addresses if a.address), "")


def agent_target(node: v1.Node) -> str:
    """`host:port` of the node's agent; FailedPrecondition when the node does not publish one."""
    name = node.metadata.name
    address = node_address(node)
    if not address:
        raise FailedPrecondition(f'node "{name}" publishes no address (status.network.addresses is empty)')
    port = node.status.network.agent_port
    if not port:
        raise FailedPrecondition(f'node "{name}" publishes no agent port (status.network.agentPort is 0)')
    try:
        if ipaddress.ip_address(address).version == 6:
            address = f"[{address}]"
    except ValueError:
        pass  # a host name
    return f"{address}:{port}"


def agent_error(exc: grpc.aio.AioRpcError, node: str, target: str) -> ApiError:
    """Our error for a failed call to the agent of `node` at `target`."""
    err = from_rpc_error(exc, target=target)
    if isinstance(err, Unavailable):
        return Unavailable(f"cannot reach the agent of node/{node} at {target}: {exc.details() or exc.code().name}")
    return err


def agent_channel(node: v1.Node, *, credentials: grpc.ChannelCredentials | None = None) -> tuple[grpc.aio.Channel, str]:
    """A channel to the agent of `node` (TLS with `credentials`, plain text without) and its `host:port`. Every
    call to an agent (Logs here; Exec and PortForward in caractrl) opens its channel this way."""
    target = agent_target(node)
    if credentials is not None:
        return grpc.aio.secure_channel(target, credentials), target
    return grpc.aio.insecure_channel(target), target


def bearer_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying `token` as a bearer token (nothing without one)."""
    return (("authorization", f"Bearer {token}"),) if token else ()


async def agent_logs(
    node: v1.Node,
    request: v1.LogsRequest,
    *,
    credentials: grpc.ChannelCredentials | None = None,
    token: str | None = None,
) -> AsyncGenerator[v1.LogLine, None]:
    """The log lines the agent of `node` sends for `request` (ends when the agent does; follows with
    `request.follow`). The channel is closed when the iteration ends or is abandoned (`aclose`)."""
    channel, target = agent_channel(node, credentials=credentials)
    metadata = bearer_metadata(token)
    async with channel:
        call = api_pb2_grpc.AgentStub(channel).Logs(request, metadata=metadata)
        try:
            async for line in call:
                yield line
        except grpc.aio.AioRpcError as exc:
            raise agent_error(exc, node.metadata.name, target) from exc
        finally:
            call.cancel()


__all__ = ["agent_channel", "agent_error", "agent_logs", "agent_target", "bearer_metadata", "node_address"]
