"""The agent's gRPC `Agent` service on `--listen`: Logs, PortForward and Exec.

Guarantees:

* **Who may** (`access.review`): a call is served to `admin` (the client certificate's common name `admin`, or a
  bearer token that the agent's `--token-file` maps to user `admin` or group `admin`), and to an identity whose
  roles grant the subresource on that project (`get projects/log`, `create projects/exec`, `create
  projects/portforward` in the project's namespace: built-in `edit`, `admin`, `cluster-admin`, never `view`),
  as the API server's authorizer answers when asked with the node's credentials; never to a node. With
  authentication off (no client CA and no token file: a loopback development node) every caller is admin, as on
  the API server. Anyone else is refused with PERMISSION_DENIED and one line saying who may not do what to which
  project, and why (an unknown token: UNAUTHENTICATED; the API server not answering: UNAVAILABLE) before anything
  is opened.
* Errors are gRPC codes a client can act on: INVALID_ARGUMENT (a bad first message), NOT_FOUND (no running
  container of that service on this node), FAILED_PRECONDITION (the container refused the port), UNAVAILABLE
  (Docker failed).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeVar

import grpc
import structlog

from caravanserai.agent.access.execstream import ExecRunner, InvalidExec
from caravanserai.agent.access.logs import LogStreamer
from caravanserai.agent.access.portforward import ForwardRefused, InvalidForward, PortForwarder
from caravanserai.agent.access.review import ACTIONS, EXEC, LOG, PORT_FORWARD, AccessReview, ReviewUnavailable
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.engine import DockerError
from caravanserai.agent.ingress.endpoints import NoEndpoint
from caravanserai.api.v1 import api_pb2, api_pb2_grpc
from caravanserai.errors import Unauthenticated
from caravanserai.process.identity import Authenticator

log = structlog.get_logger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]
T = TypeVar("T")
Target = api_pb2.LogsRequest | api_pb2.PortForwardRequest | api_pb2.ExecStart | None
"""What names the project: the request, or the stream's first message (None when there is none)."""


async def authorize(
    authenticator: Authenticator, access: AccessReview, context: Context, subresource: str, target: Target
) -> None:
    """Abort the call unless its caller may use `subresource` of the project `target` names (module docstring)."""
    try:
        who = authenticator.identify(context)
    except Unauthenticated as exc:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, exc.message)
    if who.is_admin:
        return
    if target is None or not target.project:
        log.warning("permission denied", user=who.user, subresource=subresource)
        action = ACTIONS[subresource].rsplit(" ", 1)[0]  # "read logs", "exec", "port-forward"
        await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{who.user} may not {action}: no project named")
    try:
        verdict = await access.review(who, subresource, namespace=target.namespace, project=target.project)
    except ReviewUnavailable as exc:
        await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
    if not verdict.allowed:
        log.warning("permission denied", user=who.user, subresource=subresource, project=target.project)
        await context.abort(grpc.StatusCode.PERMISSION_DENIED, verdict.message)


async def abort_for(context: Context, exc: Exception, *, what: str) -> None:
    """Abort with the code for one of the refusals named in the module docstring."""
    if isinstance(exc, (InvalidForward, InvalidExec)):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    if isinstance(exc, NoEndpoint):
        await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
    if isinstance(exc, ForwardRefused):
        await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
    log.warning(f"{what} failed", error=str(exc))
    await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))


async def _first_read(requests: AsyncIterator[T]) -> tuple[T | None, AsyncIterator[T]]:
    """The first message, and the same stream with it still first. A call answered (refused) before the server has
    read anything from a client that is still sending can end with INTERNAL instead of the refusal's code."""
    first = await anext(requests, None)

    async def chained() -> AsyncIterator[T]:
        if first is None:
            return
        yield first
        async for request in requests:
            yield request

    return first, chained()


class AgentService(api_pb2_grpc.AgentServicer):
    """caravanserai.v1.Agent on the agent's --listen address."""

    def __init__(
        self,
        streamer: LogStreamer,
        forwarder: PortForwarder,
        runner: ExecRunner,
        *,
        authenticator: Authenticator,
        access: AccessReview,
    ) -> None:
        self._streamer = streamer
        self._forwarder = forwarder
        self._runner = runner
        self._authenticator = authenticator
        self._access = access

    async def Logs(  # noqa: N802 - gRPC method name
        self, request: api_pb2.LogsRequest, context: grpc.aio.ServicerContext[api_pb2.LogsRequest, api_pb2.LogLine]
    ) -> AsyncIterator[api_pb2.LogLine]:
        await authorize(self._authenticator, self._access, context, LOG, request)
        if not request.project:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "project is required")
        try:
            async for entry in self._streamer.stream(request):
                yield entry.to_proto(timestamps=request.timestamps)
        except LookupError as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        except DockerError as exc:
            project = naming.project_in(request.namespace, request.project)
            log.warning("log stream failed", project=project, service=request.service, error=str(exc))
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))

    async def PortForward(  # noqa: N802 - gRPC method name
        self, request_iterator: AsyncIterator[api_pb2.PortForwardRequest], context: Context
    ) -> AsyncIterator[api_pb2.PortForwardResponse]:
        first, requests = await _first_read(request_iterator)
        await authorize(self._authenticator, self._access, context, PORT_FORWARD, first)
        try:
            async for response in self._forwarder.forward(requests):
                yield response
        except (InvalidForward, NoEndpoint, ForwardRefused, DockerError) as exc:
            await abort_for(context, exc, what="port-forward")

    async def Exec(  # noqa: N802 - gRPC method name
        self, request_iterator: AsyncIterator[api_pb2.ExecRequest], context: Context
    ) -> AsyncIterator[api_pb2.ExecResponse]:
        first, requests = await _first_read(request_iterator)
        start = first.start if first is not None and first.HasField("start") else None
        await authorize(self._authenticator, self._access, context, EXEC, start)
        try:
            async for response in self._runner.run(requests):
                yield response
        except (InvalidExec, NoEndpoint, DockerError) as exc:
            await abort_for(context, exc, what="exec")


__all__ = ["AgentService", "abort_for", "authorize"]
