"""The ingress route table: which project, service and port answer for a host name, and on which node.

Fed by informers (projects and nodes of the whole cluster), read by the ingress proxy on every request.

Guarantees:

* **Host names** follow `caravanserai.project.ingresshosts` (`{host}.{project}.local`, dotted hosts verbatim); lookups
  ignore case, a trailing dot and a `:port`.
* **Every declared route is known**, whatever the project's phase, so that the proxy can tell an unknown host
  (404) from a known host whose project is not Running (503). A project leaves the table when it is deleted.
* **Conflicts are stable**: when two projects declare the same host, the older project (creation time, then
  name) keeps it; the other's route is reported by `conflicts()`.
* **Nodes**: the table also knows each node's ingress endpoint (its preferred address and `ingress_port`) and the
  set of every node address, which `Internal` routes are served to.
* Changes apply at once (the informer's handler calls them); lookups never wait.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass

from caravanserai import v1
from caravanserai.informer import Informer
from caravanserai.project.ingresshosts import INTERNAL, PUBLIC, normalize_host, route_host

ADDRESS_PREFERENCE = ("InternalIP", "ExternalIP", "Hostname")


@dataclass(frozen=True, slots=True)
class Route:
    """One ingress of one project. `node` is "" while the project is on no node; `container_id` is the target
    service's container as the project's status reports it (a new container means a new backend address)."""

    host: str
    project: str
    ingress: str
    service: str
    port: int
    scope: str
    phase: str
    node: str
    container_id: str
    created: float

    @property
    def public(self) -> bool:
        return self.scope == PUBLIC

    @property
    def running(self) -> bool:
        return self.phase == v1.RUNNING and bool(self.node)


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    """Where a node's ingress listens (port 0: it serves none) and every address it has."""

    name: str
    address: str
    ingress_port: int
    addresses: frozenset[str]


def project_routes(project: v1.Project) -> list[Route]:
    """The routes `project` declares, in spec order."""
    meta, status = project.metadata, project.status
    containers = {s.name: s.container_id for s in status.services}
    created = meta.creation_timestamp.seconds + meta.creation_timestamp.nanos / 1e9
    return [
        Route(
            host=route_host(i.host, project=meta.name, name=i.name),
            project=meta.name,
            ingress=i.name,
            service=i.target.service,
            port=i.target.port,
            scope=i.access.scope or INTERNAL,
            phase=status.phase,
            node=status.node_ref,
            container_id=containers.get(i.target.service, ""),
            created=created,
        )
        for i in project.spec.ingress
    ]


def node_endpoint(node: v1.Node) -> NodeEndpoint:
    """The ingress endpoint of `node` from its status."""
    network = node.status.network
    by_type = {a.type: a.address for a in network.addresses if a.address}
    address = next((by_type[t] for t in ADDRESS_PREFERENCE if t in by_type), "")
    every = frozenset(a.address for a in network.addresses if a.address)
    return NodeEndpoint(node.metadata.name, address, network.ingress_port, every)


def _rank(route: Route) -> tuple[float, str]:
    return route.created, route.project


class RouteTable:
    """host → Route and node → NodeEndpoint, kept current by `set_project`/`remove_project`/`set_node`/
    `remove_node` (or by `follow`, which registers those as informer handlers)."""

    def __init__(self) -> None:
        self._by_project: dict[str, list[Route]] = {}
        self._by_host: dict[str, Route] = {}
        self._nodes: dict[str, NodeEndpoint] = {}
        self._node_addresses: frozenset[str] = frozenset()

    def lookup(self, host_header: str) -> Route | None:
        """The route for a Host header, or None when no project declares the host."""
        return self._by_host.get(normalize_host(host_header))

    def node(self, name: str) -> NodeEndpoint | None:
        return self._nodes.get(name)

    def is_node_address(self, address: str) -> bool:
        """True when `address` is one of the addresses a node of the cluster publishes."""
        return address in self._node_addresses

    def routes(self) -> builtins.list[Route]:
        """The served route of every host, sorted by host."""
        return [self._by_host[h] for h in sorted(self._by_host)]

    def conflicts(self) -> builtins.list[Route]:
        """Routes that lost their host to an older project."""
        return [r for rs in self._by_project.values() for r in rs if self._by_host.get(r.host) != r]

    def set_project(self, project: v1.Project) -> None:
        name = project.metadata.name
        old = self._by_project.pop(name, [])
        new = project_routes(project)
        if new:
            self._by_project[name] = new
        self._rehost({r.host for r in old} | {r.host for r in new})

    def remove_project(self, project: v1.Project | str) -> None:
        name = project if isinstance(project, str) else project.metadata.name
        old = self._by_project.pop(name, [])
        self._rehost({r.host for r in old})

    def set_node(self, node: v1.Node) -> None:
        self._nodes[node.metadata.name] = node_endpoint(node)
        self._readdress()

    def remove_node(self, node: v1.Node | str) -> None:
        self._nodes.pop(node if isinstance(node, str) else node.metadata.name, None)
        self._readdress()

    def follow(self, projects: Informer[v1.Project], nodes: Informer[v1.Node]) -> None:
        """Keep the table current from the two informers (every project and every node of the cluster)."""
        projects.add_event_handler(
            on_add=self.set_project,
            on_update=lambda _old, new: self.set_project(new),
            on_delete=self.remove_project,
            name="ingress-routes",
        )
        nodes.add_event_handler(
            on_add=self.set_node,
            on_update=lambda _old, new: self.set_node(new),
            on_delete=self.remove_node,
            name="ingress-nodes",
        )

    def _rehost(self, hosts: set[str]) -> None:
        for host in hosts:
            claims = [r for rs in self._by_project.values() for r in rs if r.host == host]
            if claims:
                self._by_host[host] = min(claims, key=_rank)
            else:
                self._by_host.pop(host, None)

    def _readdress(self) -> None:
        self._node_addresses = frozenset(a for n in self._nodes.values() for a in n.addresses)


__all__ = [
    "NodeEndpoint",
    "Route",
    "RouteTable",
    "node_endpoint",
    "project_routes",
]
