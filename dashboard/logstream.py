"""Live log tails for the project page, through the agent's log stream (`caravanserai.client.agentlogs`, the
same path as `caractrl logs`), with the dashboard's own credentials."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any

import grpc

from caravanserai import v1
from caravanserai.client.agentlogs import agent_logs
from caravanserai.dashboard.actions import ActionError, api_error
from caravanserai.errors import ApiError

MAX_TAIL = 10_000


class LogSource:
    """Opens follow-mode log streams for projects found in the cache (`lookup(resource, name)`)."""

    def __init__(
        self,
        lookup: Callable[[str, str], Any],
        *,
        credentials: grpc.ChannelCredentials | None,
        token: str | None,
    ) -> None:
        self._lookup = lookup
        self._credentials = credentials
        self._token = token

    def open(self, project: v1.Project, service: str, *, tail: int) -> AsyncGenerator[v1.LogLine, None]:
        """The lines of `service` (every service when ""), the last `tail` first, then following. ActionError at
        once when the project is on no node or has no such service; during the iteration when the agent fails."""
        name = project.metadata.name
        services = [s.name for s in project.spec.services]
        if service and service not in services:
            raise ActionError(404, f'project "{name}" has no service "{service}" (services: {", ".join(services)})')
        if not project.status.node_ref:
            raise ActionError(409, f'project "{name}" is not on a node (phase {project.status.phase})')
        node = self._lookup("nodes", project.status.node_ref)
        if node is None:
            raise ActionError(
                409, f'project "{name}" is bound to node "{project.status.node_ref}", which does not exist'
            )
        request = v1.LogsRequest(
            project=name,
            namespace=project.metadata.namespace,
            service=service,
            follow=True,
            tail=max(-1, min(tail, MAX_TAIL)),
        )
        return self._lines(node, request)

    async def _lines(self, node: v1.Node, request: v1.LogsRequest) -> AsyncGenerator[v1.LogLine, None]:
        stream = agent_logs(node, request, credentials=self._credentials, token=self._token)
        try:
            async for line in stream:
                yield line
        except ApiError as err:
            raise api_error(err) from None
        finally:
            await stream.aclose()


__all__ = ["LogSource"]
