"""A project's Route (`caravanserai.project.routing`): hosts, nodes, hand-off, owner; nothing of the spec."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.project import routing
from caravanserai.testing.builders import project


def shop(*, namespace: str = "", node: str = "n1") -> v1.Project:
    p = project("shop", services=["web", "db"], namespace=namespace)
    p.metadata.uid = "uid-shop"
    p.metadata.creation_timestamp.seconds = 100
    p.spec.services[0].env.add(name="PASSWORD", value="hunter2")
    site = p.spec.ingress.add(name="site", host="web")
    site.target.service, site.target.port = "web", 8080
    admin = p.spec.ingress.add(name="admin", host="admin.example.com")
    admin.target.service, admin.target.port, admin.access.scope = "db", 9000, "Public"
    p.status.phase, p.status.node_ref = v1.RUNNING, node
    p.status.services.add(name="web", container_id="c-web", ready=True)
    return p


def machine(name: str, *addresses: tuple[str, str], port: int = 8081) -> v1.Node:
    n = v1.Node(metadata=v1.ObjectMeta(name=name))
    for kind, address in addresses:
        n.status.network.addresses.add(type=kind, address=address)
    n.status.network.ingress_port = port
    return n


NODES = {
    "n1": machine("n1", ("Hostname", "host-1"), ("InternalIP", "10.0.0.1")),
    "n2": machine("n2", ("ExternalIP", "192.0.2.2"), port=9091),
}


def test_a_route_carries_hosts_node_and_scope() -> None:
    route = routing.route_of(shop(), NODES.get)
    assert route is not None
    assert (route.metadata.name, route.metadata.namespace, route.spec.project) == ("shop", "default", "shop")
    ref = route.metadata.owner_references[0]
    assert (ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == (
        "Project",
        "shop",
        "uid-shop",
        True,
        False,
    )
    hosts = [(h.host, h.ingress, h.service, h.port, h.scope, h.ready, h.container_id) for h in route.spec.hosts]
    assert hosts == [
        ("web.shop.local", "site", "web", 8080, "Internal", True, "c-web"),  # `web.hello.local` naming kept
        ("admin.example.com", "admin", "db", 9000, "Public", False, ""),  # db reports no status yet
    ]
    endpoint = route.spec.node
    assert (endpoint.node, endpoint.address, endpoint.ingress_port) == ("n1", "10.0.0.1", 8081)
    assert list(endpoint.addresses) == ["10.0.0.1", "host-1"]
    assert route.spec.phase == v1.RUNNING and route.spec.project_created.seconds == 100
    assert not route.spec.previous_node.node and not route.spec.HasField("handoff_deadline")


def test_nothing_of_the_spec_leaves_with_the_route() -> None:
    route = routing.route_of(shop(), NODES.get)
    assert route is not None
    wire = route.SerializeToString()
    for secret in (b"hunter2", b"PASSWORD", b"busybox"):
        assert secret not in wire


def test_another_namespace_names_its_hosts_and_holds_its_route() -> None:
    route = routing.route_of(shop(namespace="team-a"), NODES.get)
    assert route is not None and route.metadata.namespace == "team-a"
    assert route.spec.hosts[0].host == "web.shop.team-a.local"


def test_a_hand_off_names_the_previous_node_while_it_lasts() -> None:
    p = shop(node="n2")
    p.status.phase, p.status.previous_node_ref = v1.SCHEDULED, "n1"
    p.status.handoff_deadline.seconds = 5000
    route = routing.route_of(p, NODES.get)
    assert route is not None
    assert (route.spec.node.node, route.spec.node.address, route.spec.node.ingress_port) == ("n2", "192.0.2.2", 9091)
    assert (route.spec.previous_node.node, route.spec.previous_node.address) == ("n1", "10.0.0.1")
    assert route.spec.handoff_deadline.seconds == 5000
    p.status.ClearField("handoff_deadline")  # finish_move: a previous node without a deadline serves nothing
    again = routing.route_of(p, NODES.get)
    assert again is not None and not again.spec.previous_node.node


def test_unknown_nodes_unbound_projects_and_projects_without_ingress() -> None:
    route = routing.route_of(shop(node="n9"), NODES.get)
    assert route is not None and route.spec.node == v1.RouteEndpoint(node="n9")
    pending = shop(node="")
    pending.status.phase = v1.PENDING
    route = routing.route_of(pending, NODES.get)
    assert route is not None and route.spec.node == v1.RouteEndpoint() and len(route.spec.hosts) == 2
    plain = shop()
    del plain.spec.ingress[:]
    assert routing.route_of(plain, NODES.get) is None


def test_replicas_name_their_owner_and_the_derivation_is_deterministic() -> None:
    p = shop()
    p.metadata.owner_references.add(kind="ProjectSet", name="set", uid="set-uid", controller=True)
    one, two = routing.route_of(p, NODES.get), routing.route_of(meta.copy(p), NODES.get)
    assert one is not None and two is not None and one.spec.owner == "set-uid"
    assert routing.same_spec(one, two) and routing.nodes_named(one) == ("n1",)
    p.status.services[0].ready = False
    three = routing.route_of(p, NODES.get)
    assert three is not None and not routing.same_spec(one, three)
