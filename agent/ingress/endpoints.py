"""Where a project's service can be reached on this node: its container, and its address on the project network.

One home for the question that port-forward, exec and the ingress all ask:

* `ServiceEndpoints.container(project, service)` is the running container of that service on this node
  (deterministic name, see `naming`), or `NoEndpoint` saying why not (no such container here, not running).
* `address(project, service)` is the container's address on the project's network (`Observed.ip`),
  which only this node can reach; `NoEndpoint` when it has none.
* `ContainerBackends` serves the ingress proxy's `Backends` seam from these, remembering each route's address
  for as long as the route's container (by id, from the project status) stays the same: a request costs no
  Docker call once its container's address is known, until the agent says the container was replaced
  (`forget_service`, a start-first update) or it refuses a connection.
"""

from __future__ import annotations

from caravanserai.agent.docker import naming
from caravanserai.agent.docker.engine import DockerError, DockerRuntime
from caravanserai.agent.docker.records import Observed
from caravanserai.agent.ingress.proxy import BackendUnavailable
from caravanserai.agent.ingress.routes import Route


class NoEndpoint(LookupError):
    """The service has no running, reachable container on this node; the message says why."""


class ServiceEndpoints:
    """Finds services' containers of this node's projects through the Docker adapter."""

    def __init__(self, runtime: DockerRuntime, *, node: str) -> None:
        self.runtime = runtime
        self.node = node

    async def container(self, project: str, service: str) -> Observed:
        """The running container of `project`/`service` on this node; NoEndpoint otherwise."""
        found = await self.runtime.inspect_container(naming.container_name(project, service, self.node))
        if found is None:
            shown = naming.shown(project)
            raise NoEndpoint(f"service {service} of project {shown} has no container on node {self.node}")
        if not found.running:
            raise NoEndpoint(f"the container of {naming.shown(project)}/{service} is {found.status or 'not running'}")
        return found

    async def address(self, project: str, service: str) -> str:
        """The container's address on the project network; NoEndpoint when it has none."""
        found = await self.container(project, service)
        address = found.ip
        if not address:
            raise NoEndpoint(
                f"the container of {naming.shown(project)}/{service} has no address on its project network"
            )
        return address


class ContainerBackends:
    """The ingress `Backends` of a node: a local route's container address and port (see the module docstring)."""

    def __init__(self, endpoints: ServiceEndpoints) -> None:
        self.endpoints = endpoints
        self._known: dict[tuple[str, str], tuple[str, str]] = {}  # (project, service) → (container id, address)

    async def address(self, route: Route) -> tuple[str, int]:
        key = (route.project, route.service)
        known = self._known.get(key)
        if known is not None and known[0] == route.container_id and route.container_id:
            return known[1], route.port
        try:
            address = await self.endpoints.address(route.project, route.service)
        except NoEndpoint as exc:
            self._known.pop(key, None)
            raise BackendUnavailable(str(exc)) from exc
        except DockerError as exc:
            raise BackendUnavailable(f"Docker did not say where its container is: {exc.message}") from exc
        self._known[key] = (route.container_id, address)
        return address, route.port

    def forget(self, route: Route) -> None:
        self.forget_service(route.project, route.service)

    def forget_service(self, project: str, service: str) -> None:
        """Find the service's container afresh at the next request (it was replaced, or refused a connection)."""
        self._known.pop((project, service), None)


__all__ = ["ContainerBackends", "NoEndpoint", "ServiceEndpoints"]
