"""How caractrl shows ingress routes: describe's Ingress Routes table and the HOSTS column of `get -o wide`."""

from __future__ import annotations

from caravanserai import v1
from caravanserai.cli.describe_project import describe_project, ingress_rows
from caravanserai.cli.kinds.project import project_row
from caravanserai.cli.tables import RowContext
from caravanserai.testing.builders import project


def hello(phase: str = v1.RUNNING) -> v1.Project:
    p = project("hello", services=["web"])
    site = p.spec.ingress.add(name="site", host="web")
    site.target.service, site.target.port = "web", 8080
    shop = p.spec.ingress.add(name="shop", host="Shop.Example.com")
    shop.target.service, shop.target.port = "web", 8080
    shop.access.scope = "Public"
    p.status.phase, p.status.node_ref = phase, "n1"
    return p


def node(port: int) -> v1.Node:
    n = v1.Node()
    n.metadata.name = "n1"
    n.status.network.addresses.add(type="InternalIP", address="10.0.0.1")
    n.status.network.ingress_port = port
    return n


def test_ingress_rows_name_urls_and_whether_served() -> None:
    assert ingress_rows(hello(), node(8081)) == [
        ["web.hello.local", "web:8080", "Internal", "http://web.hello.local:8081/", "yes, by node n1 (10.0.0.1:8081)"],
        ["shop.example.com", "web:8080", "Public", "http://shop.example.com:8081/", "yes, by node n1 (10.0.0.1:8081)"],
    ]
    assert ingress_rows(hello(v1.SCHEDULED), node(8081))[0][4] == "no: the project is Scheduled"
    assert ingress_rows(hello(), node(0))[0][3:] == [
        "http://web.hello.local/",
        "no: node n1 runs no ingress (any other node's ingress forwards)",
    ]
    text = describe_project(hello(), [], 0.0, node=node(8081))
    assert "Ingress Routes:" in text and "http://web.hello.local:8081/" in text
    assert "Ingress Routes:" not in describe_project(project("plain"), [], 0.0)


def test_wide_rows_list_the_hosts() -> None:
    row = project_row(hello(), RowContext(), wide=True)
    assert row[6] == "web.hello.local->web:8080,shop.example.com->web:8080"
