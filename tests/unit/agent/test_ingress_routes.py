"""The ingress route table: host naming, lookups, conflicts, nodes."""

from __future__ import annotations

import pytest

from caravanserai import v1
from caravanserai.agent.ingress.routes import RouteTable
from caravanserai.project.ingresshosts import normalize_host, route_host
from caravanserai.testing.builders import project


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
    assert route_host(host, project="shop", name="site") == expected


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
    table.set_project(shop("shop"))
    route = table.lookup("WEB.shop.local:8081")
    assert route is not None and (route.project, route.service, route.port, route.node) == ("shop", "web", 8080, "n1")
    assert route.scope == "Internal" and not route.public and route.running and route.container_id == "c-shop"
    table.set_project(shop("shop", phase=v1.SCHEDULED, node="n2"))  # moved
    moved = table.lookup("web.shop.local")
    assert moved is not None and (moved.node, moved.running) == ("n2", False)
    table.set_project(shop("shop", host="www.example.com"))  # host changed: the old one is gone
    assert table.lookup("web.shop.local") is None and table.lookup("www.example.com") is not None
    table.remove_project("shop")
    assert table.routes() == []


def test_the_older_project_keeps_a_shared_host() -> None:
    table = RouteTable()
    table.set_project(shop("young", host="app.example.com", created=20))
    table.set_project(shop("old", host="app.example.com", created=10))
    assert table.lookup("app.example.com").project == "old"  # type: ignore[union-attr]  # the host has a route
    assert [r.project for r in table.conflicts()] == ["young"]
    table.remove_project("old")
    assert table.lookup("app.example.com").project == "young"  # type: ignore[union-attr]  # the host has a route
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
