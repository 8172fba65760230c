"""A project's Route: what every node's ingress needs to answer for its hosts, and nothing else of the project.

    route = routing.route_of(project, nodes.get)    # None: the project declares no ingress

The routes controller (`controllers/routes`) writes what this derives; the agents' ingress reads it
(`agent/ingress/routes.py`). One home for the rule, so that both sides and the tests agree.

Guarantees:

* **One Route per project that declares an ingress**, named after it in its namespace and owned by it (a
  controller owner reference that does not block its deletion), so the garbage collector removes it with the
  project. A project without ingresses has none.
* **Only routing facts**: each ingress's host (`ingresshosts.route_host`), service, port, scope (`Internal` when
  unset), the target service's readiness and container id; the project's phase, node, hand-off (previous node and
  deadline, only while both are set), managing controller's uid and creation time; each named node's ingress
  endpoint from its status (its preferred address, InternalIP then ExternalIP then Hostname, its ingress port and
  every address; empty while the Node is unknown). Never the project's services, images, environment or data.
* **Deterministic**: the same project and nodes give the same Route (`same_spec` compares what a write would
  change), so the controller writes only on change.
"""

from __future__ import annotations

from collections.abc import Callable

from caravanserai import meta, v1
from caravanserai.project.ingresshosts import INTERNAL, route_host
from caravanserai.project.readiness import counts_as_ready

ADDRESS_PREFERENCE = ("InternalIP", "ExternalIP", "Hostname")

NodeLookup = Callable[[str], v1.Node | None]


def preferred_address(node: v1.Node) -> str:
    """The address other nodes reach `node`'s ingress at ("" when it reports none)."""
    by_type = {a.type: a.address for a in node.status.network.addresses if a.address}
    return next((by_type[t] for t in ADDRESS_PREFERENCE if t in by_type), "")


def endpoint(name: str, nodes: NodeLookup) -> v1.RouteEndpoint:
    """The ingress endpoint of node `name` (only its name while the Node is unknown; empty for "")."""
    if not name:
        return v1.RouteEndpoint()
    found = nodes(name)
    if found is None:
        return v1.RouteEndpoint(node=name)
    network = found.status.network
    return v1.RouteEndpoint(
        node=name,
        address=preferred_address(found),
        ingress_port=network.ingress_port,
        addresses=sorted({a.address for a in network.addresses if a.address}),
    )


def _hosts(project: v1.Project) -> list[v1.RouteHost]:
    metadata = project.metadata
    services = {s.name: s for s in project.status.services}
    hosts = []
    for ingress in project.spec.ingress:
        target = services.get(ingress.target.service)
        hosts.append(
            v1.RouteHost(
                host=route_host(ingress.host, project=metadata.name, name=ingress.name, namespace=metadata.namespace),
                ingress=ingress.name,
                service=ingress.target.service,
                port=ingress.target.port,
                scope=ingress.access.scope or INTERNAL,
                ready=target is not None and counts_as_ready(target),
                container_id=target.container_id if target is not None else "",
            )
        )
    return hosts


def route_of(project: v1.Project, nodes: NodeLookup) -> v1.Route | None:
    """The Route of `project` (stored: it has a uid), its nodes looked up in `nodes`; None without ingresses."""
    if not project.spec.ingress:
        return None
    metadata, status = project.metadata, project.status
    route = v1.Route(api_version=v1.API_VERSION, kind="Route")
    route.metadata.name = metadata.name
    route.metadata.namespace = metadata.namespace or meta.DEFAULT_NAMESPACE
    route.metadata.owner_references.append(meta.owner_reference(project, controller=True, block_owner_deletion=False))
    spec = route.spec
    spec.project = metadata.name
    spec.phase = status.phase
    spec.node.CopyFrom(endpoint(status.node_ref, nodes))
    if status.previous_node_ref and status.HasField("handoff_deadline"):
        spec.previous_node.CopyFrom(endpoint(status.previous_node_ref, nodes))
        spec.handoff_deadline.CopyFrom(status.handoff_deadline)
    controller = meta.controller_of(project)
    spec.owner = controller.uid if controller is not None else ""
    spec.project_created.CopyFrom(metadata.creation_timestamp)
    spec.hosts.extend(_hosts(project))
    return route


def same_spec(stored: v1.Route, wanted: v1.Route) -> bool:
    """Whether writing `wanted` over `stored` would change nothing: the same spec and owner references."""
    return stored.spec == wanted.spec and list(stored.metadata.owner_references) == list(
        wanted.metadata.owner_references
    )


def nodes_named(route: v1.Route) -> tuple[str, ...]:
    """The nodes whose endpoints `route` carries (the node and, during a hand-off, the previous node)."""
    return tuple(n for n in (route.spec.node.node, route.spec.previous_node.node) if n)


__all__ = ["ADDRESS_PREFERENCE", "NodeLookup", "endpoint", "nodes_named", "preferred_address", "route_of", "same_spec"]
