"""The ingress route table: which project, service and port answer for a host name, and on which node.

Fed by informers (projects and nodes of the whole cluster), read by the ingress proxy on every request.

Guarantees:

* **Host names** follow `caravanserai.project.ingresshosts` (`{host}.{project}.local`, outside `default`
  `{host}.{project}.{namespace}.local`, dotted hosts verbatim); lookups ignore case, a trailing dot and a `:port`.
  A route's `project` is the project's key (`naming.key_of`).
* **Every declared route is known**, whatever the project's phase, so that the proxy can tell an unknown host
  (404) from a known host whose project is not Running (503). A project leaves the table when it is deleted.
* **Replicas share a host**: projects with the same managing controller (the `controller` owner reference's uid:
  replicas of one set) that declare the same host form one group, and the host is served by every member of the
  group (`replicas`; which member answers a request is the proxy's balancer's choice).
* **Conflicts are stable**: when unrelated projects (different controllers, or none) declare the same host, the
  group of the older project (creation time, then name) keeps it; the others' routes are reported by
  `conflicts()`. A project alone is a group of one, so two single projects behave as they always did.
* **Nodes**: the table also knows each node's ingress endpoint (its preferred address and `ingress_port`) and the
  set of every node address, which `Internal` routes are served to.
* Changes apply at once (the informer's handler calls them); lookups never wait.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass

from caravanserai import meta, v1
from caravanserai.agent.docker import naming
from caravanserai.clock import seconds
from caravanserai.informer import Informer
from caravanserai.project.ingresshosts import INTERNAL, PUBLIC, normalize_host, route_host
from caravanserai.project.readiness import counts_as_ready

ADDRESS_PREFERENCE = ("InternalIP", "ExternalIP", "Hostname")


@dataclass(frozen=True, slots=True)
class Route:
    """One ingress of one project. `node` is "" while the project is on no node; `container_id` is the target
    service's container as the project's status reports it (a new container means a new backend address);
    `ready` whether that service counts as ready (`project.readiness`). `owner` is the uid of the project's
    managing controller ("" without one): routes of one owner share their host. While the project is handed over
    (`status.previousNodeRef` with a `handoffDeadline`), `previous_node` still runs the old copy until
    `handoff_until` (unix seconds; 0: no hand-off)."""

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
    ready: bool = False
    owner: str = ""
    previous_node: str = ""
    handoff_until: float = 0.0

    @property
    def group(self) -> tuple[str, str]:
        """Routes of one group share their host: ("owner", uid) for replicas, ("project", name) for the others."""
        return ("owner", self.owner) if self.owner else ("project", self.project)

    @property
    def shown(self) -> str:
        """How pages name the route's project: its name in `default`, its key in another namespace."""
        return naming.shown(self.project)

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
    metadata, status = project.metadata, project.status
    services = {s.name: s for s in status.services}
    created = metadata.creation_timestamp.seconds + metadata.creation_timestamp.nanos / 1e9
    controller = meta.controller_of(project)
    handoff = status.HasField("handoff_deadline") and bool(status.previous_node_ref)
    return [
        Route(
            host=route_host(i.host, project=metadata.name, name=i.name, namespace=metadata.namespace),
            project=naming.key_of(project),
            ingress=i.name,
            service=i.target.service,
            port=i.target.port,
            scope=i.access.scope or INTERNAL,
            phase=status.phase,
            node=status.node_ref,
            container_id=services[i.target.service].container_id if i.target.service in services else "",
            created=created,
            ready=i.target.service in services and counts_as_ready(services[i.target.service]),
            owner=controller.uid if controller is not None else "",
            previous_node=status.previous_node_ref if handoff else "",
            handoff_until=seconds(status.handoff_deadline) if handoff else 0.0,
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
        self._by_host: dict[str, tuple[Route, ...]] = {}  # host → the group serving it, oldest first
        self._nodes: dict[str, NodeEndpoint] = {}
        self._node_addresses: frozenset[str] = frozenset()

    def lookup(self, host_header: str) -> Route | None:
        """The route for a Host header (the oldest of its group), or None when no project declares the host."""
        group = self._by_host.get(normalize_host(host_header))
        return group[0] if group else None

    def replicas(self, host_header: str) -> tuple[Route, ...]:
        """Every route serving a Host header, oldest first: one for a single project, one per replica for
        projects of one owner; () when no project declares the host."""
        return self._by_host.get(normalize_host(host_header), ())

    def node(self, name: str) -> NodeEndpoint | None:
        return self._nodes.get(name)

    def is_node_address(self, address: str) -> bool:
        """True when `address` is one of the addresses a node of the cluster publishes."""
        return address in self._node_addresses

    def routes(self) -> builtins.list[Route]:
        """The served routes of every host (every replica), sorted by host, oldest first."""
        return [r for h in sorted(self._by_host) for r in self._by_host[h]]

    def conflicts(self) -> builtins.list[Route]:
        """Routes that lost their host to an older, unrelated project."""
        return [r for rs in self._by_project.values() for r in rs if r not in self._by_host.get(r.host, ())]

    def set_project(self, project: v1.Project) -> None:
        name = naming.key_of(project)
        old = self._by_project.pop(name, [])
        new = project_routes(project)
        if new:
            self._by_project[name] = new
        self._rehost({r.host for r in old} | {r.host for r in new})

    def remove_project(self, project: v1.Project | str) -> None:
        name = naming.project_key(project) if isinstance(project, str) else naming.key_of(project)
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
                winner = min(claims, key=_rank).group
                self._by_host[host] = tuple(sorted((r for r in claims if r.group == winner), key=_rank))
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
