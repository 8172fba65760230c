"""The ingress route table: which project, service and port answer for a host name, and on which node.

Fed by informers of every Route (`caravanserai.project.routing`: one per project that declares an ingress, derived
by the routes controller) and of every Node, read by the ingress proxy on every request. The agent reads no other
node's project: a Route carries the hosts, the node, its endpoint, the scope and the hand-off, nothing of the spec.

Guarantees:

* **Host names** follow `caravanserai.project.ingresshosts` (`{host}.{project}.local`, outside `default`
  `{host}.{project}.{namespace}.local`, dotted hosts verbatim); lookups ignore case, a trailing dot and a `:port`.
  A route's `project` is the project's key (`naming.project_in`), which is its Route's key too.
* **Every declared route is known**, whatever the project's phase, so that the proxy can tell an unknown host
  (404) from a known host whose project is not Running (503). A project leaves the table when its Route goes
  (the project was deleted, or declares no ingress any more).
* **Replicas share a host**: projects with the same managing controller (the `controller` owner reference's uid:
  replicas of one set) that declare the same host form one group, and the host is served by every member of the
  group (`replicas`; which member answers a request is the proxy's balancer's choice).
* **Conflicts are stable**: when unrelated projects (different controllers, or none) declare the same host, the
  group of the older project (its creation time, then its key) keeps it; the others' routes are reported by
  `conflicts()`. A project alone is a group of one, so two single projects behave as they always did.
* **Nodes**: each node's ingress endpoint (its preferred address and `ingress_port`) is the one the Routes naming
  it carry, else the one its Node reports; the set of every node address (Internal routes without node
  certificates, and the connection limits' exemption) is every address the Nodes and the Routes report.
* Changes apply at once (the informer's handler calls them); lookups never wait.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass

from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.clock import seconds
from caravanserai.informer import Informer
from caravanserai.project.ingresshosts import INTERNAL, PUBLIC, normalize_host
from caravanserai.project.routing import preferred_address


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


def routes_of(route: v1.Route) -> list[Route]:
    """The routes of the project a Route describes, in its spec order."""
    spec = route.spec
    created = spec.project_created.seconds + spec.project_created.nanos / 1e9
    handoff = route.spec.HasField("handoff_deadline") and bool(spec.previous_node.node)
    return [
        Route(
            host=h.host,
            project=route_key(route),
            ingress=h.ingress,
            service=h.service,
            port=h.port,
            scope=h.scope or INTERNAL,
            phase=spec.phase,
            node=spec.node.node,
            container_id=h.container_id,
            created=created,
            ready=h.ready,
            owner=spec.owner,
            previous_node=spec.previous_node.node if handoff else "",
            handoff_until=seconds(spec.handoff_deadline) if handoff else 0.0,
        )
        for h in spec.hosts
    ]


def route_key(route: v1.Route | str) -> str:
    """The key of a Route (its project's): "namespace/name", `default` when it names none."""
    if isinstance(route, str):
        return naming.project_key(route)
    return naming.project_in(route.metadata.namespace, route.metadata.name)


def node_endpoint(node: v1.Node) -> NodeEndpoint:
    """The ingress endpoint of `node` from its status."""
    network = node.status.network
    every = frozenset(a.address for a in network.addresses if a.address)
    return NodeEndpoint(node.metadata.name, preferred_address(node), network.ingress_port, every)


def route_endpoints(route: v1.Route) -> list[NodeEndpoint]:
    """The endpoints of the nodes a Route names (those it knows an address of)."""
    return [
        NodeEndpoint(e.node, e.address, e.ingress_port, frozenset(e.addresses))
        for e in (route.spec.node, route.spec.previous_node)
        if e.node and e.address
    ]


def _rank(route: Route) -> tuple[float, str]:
    return route.created, route.project


class RouteTable:
    """host → Route and node → NodeEndpoint, kept current by `set_route`/`remove_route`/`set_node`/`remove_node`
    (or by `follow`, which registers those as informer handlers)."""

    def __init__(self) -> None:
        self._by_project: dict[str, list[Route]] = {}
        self._by_host: dict[str, tuple[Route, ...]] = {}  # host → the group serving it, oldest first
        self._nodes: dict[str, NodeEndpoint] = {}  # from the Nodes
        self._routed: dict[str, dict[str, NodeEndpoint]] = {}  # node → {route key: the endpoint that Route carries}
        self._endpoints_of: dict[str, list[NodeEndpoint]] = {}  # route key → the endpoints it carries
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
        """Where node `name`'s ingress listens: as the Routes naming it say, else as its Node says."""
        routed = self._routed.get(name)
        if routed:
            return next(reversed(routed.values()))
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

    def set_route(self, route: v1.Route) -> None:
        key = route_key(route)
        old = self._by_project.pop(key, [])
        new = routes_of(route)
        if new:
            self._by_project[key] = new
        self._rehost({r.host for r in old} | {r.host for r in new})
        self._reendpoint(key, route_endpoints(route))

    def remove_route(self, route: v1.Route | str) -> None:
        key = route_key(route)
        old = self._by_project.pop(key, [])
        self._rehost({r.host for r in old})
        self._reendpoint(key, [])

    def set_node(self, node: v1.Node) -> None:
        self._nodes[node.metadata.name] = node_endpoint(node)
        self._readdress()

    def remove_node(self, node: v1.Node | str) -> None:
        self._nodes.pop(node if isinstance(node, str) else node.metadata.name, None)
        self._readdress()

    def follow(self, routes: Informer[v1.Route], nodes: Informer[v1.Node]) -> None:
        """Keep the table current from the two informers (every Route and every Node of the cluster)."""
        routes.add_event_handler(
            on_add=self.set_route,
            on_update=lambda _old, new: self.set_route(new),
            on_delete=self.remove_route,
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

    def _reendpoint(self, key: str, endpoints: builtins.list[NodeEndpoint]) -> None:
        """Record the endpoints the Route of `key` carries now (replacing what it carried before)."""
        old = self._endpoints_of.pop(key, [])
        if old == endpoints:
            if endpoints:
                self._endpoints_of[key] = endpoints
            return
        for endpoint in old:
            routed = self._routed.get(endpoint.name, {})
            routed.pop(key, None)
            if not routed:
                self._routed.pop(endpoint.name, None)
        for endpoint in endpoints:
            self._routed.setdefault(endpoint.name, {})[key] = endpoint
        if endpoints:
            self._endpoints_of[key] = endpoints
        self._readdress()

    def _readdress(self) -> None:
        routed = (a for rs in self._routed.values() for e in rs.values() for a in e.addresses)
        self._node_addresses = frozenset(a for n in self._nodes.values() for a in n.addresses) | frozenset(routed)


__all__ = [
    "NodeEndpoint",
    "Route",
    "RouteTable",
    "node_endpoint",
    "route_endpoints",
    "route_key",
    "routes_of",
]
