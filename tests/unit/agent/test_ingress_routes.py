"""The ingress route table: host naming, lookups, conflicts, nodes."""

from __future__ import annotations

import pytest

from caravanserai import meta, v1
from caravanserai.agent.ingress.routes import RouteTable, routes_of
from caravanserai.project.ingresshosts import ingress_host, normalize_host, route_host
from caravanserai.testing.builders import project
from support.routes import route_for


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("web", "web.shop.local"),
        ("Web", "web.shop.local"),
        ("", "site.shop.local"),
        ("www.example.com", "www.example.com"),
        ("WWW.Example.com.", "www.example.com"),
    ],
)
def test_route_host(host: str, expected: str) -> None:
    assert route_host(host, project="shop", name="site", namespace="default") == expected
    assert route_host(host, project="shop", name="site", namespace="") == expected


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("web", "web.shop.team-a.local"),
        ("", "site.shop.team-a.local"),
        ("www.example.com", "www.example.com"),  # a dotted host is the user's, in any namespace
    ],
)
def test_route_host_of_another_namespace_names_it(host: str, expected: str) -> None:
    assert route_host(host, project="shop", name="site", namespace="team-a") == expected


def test_ingress_host_reads_the_projects_namespace() -> None:
    p = shop("shop")
    assert ingress_host(p, p.spec.ingress[0]) == "web.shop.local"
    p.metadata.namespace = "default"
    assert ingress_host(p, p.spec.ingress[0]) == "web.shop.local"  # `web.hello.local` keeps working
    p.metadata.namespace = "team-b"
    assert ingress_host(p, p.spec.ingress[0]) == "web.shop.team-b.local"


def test_two_projects_of_one_name_in_two_namespaces_have_their_own_routes() -> None:
    table = RouteTable()
    for namespace in ("team-a", "team-b"):
        p = shop("shop")
        p.metadata.namespace = namespace
        table.set_route(route_for(p))
    a, b = table.lookup("web.shop.team-a.local"), table.lookup("web.shop.team-b.local")
    assert a is not None and a.project == "team-a/shop" and b is not None and b.project == "team-b/shop"
    assert table.lookup("web.shop.local") is None and table.conflicts() == []
    table.remove_route("team-a/shop")  # a key, as an informer's deletion without the object says it
    assert table.lookup("web.shop.team-a.local") is None and table.lookup("web.shop.team-b.local") == b


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("web.shop.local", "web.shop.local"),
        ("Web.Shop.Local:8081", "web.shop.local"),
        ("example.com.", "example.com"),
        ("[::1]:8081", "[::1]"),
        ("10.0.0.1:80", "10.0.0.1"),
    ],
)
def test_normalize_host(header: str, expected: str) -> None:
    assert normalize_host(header) == expected


def shop(name: str, *, host: str = "web", created: int = 0, phase: str = v1.RUNNING, node: str = "n1") -> v1.Project:
    p = project(name, services=["web"])
    p.metadata.creation_timestamp.seconds = created
    ingress = p.spec.ingress.add(name="site", host=host)
    ingress.target.service, ingress.target.port = "web", 8080
    p.status.phase, p.status.node_ref = phase, node
    p.status.services.add(name="web", container_id="c-" + name)
    return p


def test_routes_follow_projects() -> None:
    table = RouteTable()
    table.set_route(route_for(shop("shop")))
    route = table.lookup("WEB.shop.local:8081")
    assert route is not None and (route.project, route.service, route.port, route.node) == (
        "default/shop",
        "web",
        8080,
        "n1",
    )
    assert route.scope == "Internal" and not route.public and route.running and route.container_id == "c-shop"
    table.set_route(route_for(shop("shop", phase=v1.SCHEDULED, node="n2")))  # moved
    moved = table.lookup("web.shop.local")
    assert moved is not None and (moved.node, moved.running) == ("n2", False)
    table.set_route(route_for(shop("shop", host="www.example.com")))  # host changed: the old one is gone
    assert table.lookup("web.shop.local") is None and table.lookup("www.example.com") is not None
    table.remove_route("shop")
    assert table.routes() == []


def test_the_older_project_keeps_a_shared_host() -> None:
    table = RouteTable()
    table.set_route(route_for(shop("young", host="app.example.com", created=20)))
    table.set_route(route_for(shop("old", host="app.example.com", created=10)))
    assert table.lookup("app.example.com").project == "default/old"  # type: ignore[union-attr]  # the host has a route
    assert [r.project for r in table.conflicts()] == ["default/young"]
    table.remove_route("old")
    young = table.lookup("app.example.com")
    assert young is not None and young.project == "default/young"
    assert table.conflicts() == []


def test_nodes_and_their_addresses() -> None:
    table = RouteTable()
    n = v1.Node()
    n.metadata.name = "n1"
    n.status.network.addresses.add(type="Hostname", address="host-1")
    n.status.network.addresses.add(type="InternalIP", address="10.0.0.1")
    n.status.network.ingress_port = 8081
    table.set_node(n)
    endpoint = table.node("n1")
    assert endpoint is not None and (endpoint.address, endpoint.ingress_port) == ("10.0.0.1", 8081)
    assert table.is_node_address("10.0.0.1") and not table.is_node_address("10.0.0.2")
    table.remove_node("n1")
    assert table.node("n1") is None and not table.is_node_address("10.0.0.1")


def replica(name: str, *, owner: str = "set-1", created: int = 0, **extra: object) -> v1.Project:
    p = shop(name, host="app.example.com", created=created, **extra)  # type: ignore[arg-type]  # shop's keywords
    p.metadata.owner_references.add(kind="ProjectSet", name="app", uid=owner, controller=True)
    p.status.services[0].ready = True
    return p


def test_replicas_of_one_owner_share_their_host() -> None:
    table = RouteTable()
    for i, name in enumerate(("app-a", "app-b", "app-c")):
        table.set_route(route_for(replica(name, created=10 + i, node=f"n{i}")))
    routes = table.replicas("APP.example.com:80")
    assert [(r.project, r.node, r.owner, r.ready) for r in routes] == [
        ("default/app-a", "n0", "set-1", True),
        ("default/app-b", "n1", "set-1", True),
        ("default/app-c", "n2", "set-1", True),
    ]
    assert table.lookup("app.example.com") == routes[0] and table.conflicts() == []
    assert [r.project for r in table.routes()] == ["default/app-a", "default/app-b", "default/app-c"]
    table.remove_route("app-a")  # a rolling update deletes the oldest: the host stays with the others
    assert [r.project for r in table.replicas("app.example.com")] == ["default/app-b", "default/app-c"]


def test_unrelated_projects_keep_first_wins_with_replicas() -> None:
    table = RouteTable()
    table.set_route(route_for(replica("other", owner="set-2", created=5)))  # another set, older: it keeps the host
    table.set_route(route_for(replica("app-a", created=10)))
    table.set_route(route_for(replica("app-b", created=11)))
    table.set_route(route_for(shop("single", host="app.example.com", created=20)))  # no owner at all
    assert [r.project for r in table.replicas("app.example.com")] == ["default/other"]
    assert sorted(r.project for r in table.conflicts()) == ["default/app-a", "default/app-b", "default/single"]
    table.remove_route("other")
    assert [r.project for r in table.replicas("app.example.com")] == ["default/app-a", "default/app-b"]
    assert [r.project for r in table.conflicts()] == ["default/single"]


def test_owner_references_that_are_not_controllers_do_not_group() -> None:
    table = RouteTable()
    for name, created in (("one", 1), ("two", 2)):
        p = shop(name, host="app.example.com", created=created)
        p.metadata.owner_references.add(kind="Team", name="t", uid="team-uid", controller=False)
        table.set_route(route_for(p))
    assert [r.project for r in table.replicas("app.example.com")] == ["default/one"]


def test_a_route_knows_its_hand_off() -> None:
    table = RouteTable()
    moved = shop("moving", phase=v1.PENDING, node="")
    moved.status.previous_node_ref = "n1"
    moved.status.handoff_deadline.seconds = 1234
    table.set_route(route_for(moved))
    route = table.lookup("web.moving.local")
    assert route is not None and (route.previous_node, route.handoff_until, route.ready) == ("n1", 1234.0, False)
    moved.status.ClearField("handoff_deadline")  # finish_move: a previous node without a deadline runs nothing
    table.set_route(route_for(moved))
    route = table.lookup("web.moving.local")
    assert route is not None and (route.previous_node, route.handoff_until) == ("", 0.0)


def test_a_routes_node_endpoint_comes_first_and_leaves_with_it() -> None:
    table = RouteTable()
    reported = v1.Node(metadata=v1.ObjectMeta(name="n1"))
    reported.status.network.addresses.add(type="InternalIP", address="10.0.0.1")
    reported.status.network.ingress_port = 8081
    table.set_node(reported)
    moved = meta.copy(reported)
    moved.status.network.addresses[0].address = "10.0.0.7"  # the Route was derived from a newer Node
    moved.status.network.ingress_port = 9091
    table.set_route(route_for(shop("shop"), moved))
    endpoint = table.node("n1")
    assert endpoint is not None and (endpoint.address, endpoint.ingress_port) == ("10.0.0.7", 9091)
    assert table.is_node_address("10.0.0.7") and table.is_node_address("10.0.0.1")
    table.remove_route("shop")
    endpoint = table.node("n1")
    assert endpoint is not None and endpoint.address == "10.0.0.1" and not table.is_node_address("10.0.0.7")


def test_routes_of_reads_a_route_alone() -> None:
    p = shop("shop", node="n2")
    p.status.previous_node_ref = "n1"
    p.status.handoff_deadline.seconds = 99
    routes = routes_of(route_for(p))
    assert [(r.host, r.project, r.node, r.previous_node, r.handoff_until, r.container_id) for r in routes] == [
        ("web.shop.local", "default/shop", "n2", "n1", 99.0, "c-shop")
    ]
