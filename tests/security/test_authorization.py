"""Mutual TLS, identities and the authorization matrix, against a real apiserver over a real etcd."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import Forbidden, Unauthenticated, Unavailable
from caravanserai.process.tls import TLSFiles
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import lease, node, project

Op = Callable[[Client], Awaitable[Any]]


async def _setup(admin: Client) -> None:
    for name in ("n1", "n2"):
        await admin.nodes.create(node(name))
        await admin.leases.create(lease(name))
    await admin.nodes.create(node("joining"))  # registered, not in a node group yet
    for name in ("g1", "g2"):
        await admin.nodes.create(node(name, labels={v1.LABEL_NODE_GROUP: "gpu"}))
    for host in ("n1", "n2"):
        ev = v1.Event()
        ev.metadata.name = f"from-{host}"
        ev.spec.involved_object.kind, ev.spec.involved_object.name = "Node", host
        ev.spec.type, ev.spec.reason, ev.spec.count = "Normal", "Tested", 1
        ev.spec.source.component, ev.spec.source.host = "cara-agent", host
        await admin.events.create(ev)
    for name, bound in (("p1", "n1"), ("p2", "n2"), ("p3", "")):
        p = await admin.projects.create(project(name))
        if bound:
            p.status.phase, p.status.node_ref = v1.SCHEDULED, bound
            await admin.projects.update_status(p)
    route = v1.Route(metadata=v1.ObjectMeta(name="p2", namespace=meta.DEFAULT_NAMESPACE))
    route.spec.project, route.spec.node.node = "p2", "n2"
    await admin.resource(v1.Route).create(route)


def _ops(admin: Client) -> dict[str, Op]:
    async def update_status(c: Client, name: str) -> None:
        p = meta.copy(await admin.projects.get(name))
        p.status.phase = v1.RUNNING
        await c.projects.update_status(p)

    async def watch_bound(c: Client) -> None:
        async for _ in c.projects.watch(field_selector="status.nodeRef=n1", resource_version="0"):
            return

    async def update_spec(c: Client) -> None:
        p = await admin.projects.get("p3")
        p.spec.priority = 3
        await c.projects.update(p)

    async def node_status(c: Client) -> None:
        n = await admin.nodes.get("n1")
        n.status.state = v1.NODE_READY
        await c.nodes.update_status(n)

    async def renew(c: Client) -> None:
        le = await admin.leases.get("n1")
        le.spec.lease_duration_seconds = 41
        await c.leases.update(le)

    async def event(c: Client) -> None:
        ev = v1.Event()
        ev.metadata.name = "p1.evt"
        ev.spec.involved_object.kind, ev.spec.involved_object.name = "Project", "p1"
        ev.spec.type, ev.spec.reason = "Normal", "Tested"
        await c.events.create(ev)

    async def count_event(c: Client, name: str) -> None:
        ev = await admin.events.get(name)
        ev.spec.count += 1
        await c.events.update(ev)

    async def relabel(c: Client, name: str, labels: dict[str, str], unschedulable: bool = False) -> None:
        n = await admin.nodes.get(name)
        n.metadata.labels.update(labels)
        n.spec.unschedulable = unschedulable
        await c.nodes.update(n)

    return {
        "update own event": lambda c: count_event(c, "from-n1"),
        "update other event": lambda c: count_event(c, "from-n2"),
        "get own project": lambda c: c.projects.get("p1"),
        "get other project": lambda c: c.projects.get("p2"),
        "list all projects": lambda c: c.projects.list(),
        "list own projects": lambda c: c.projects.list(field_selector="status.nodeRef=n1"),
        "watch own projects": watch_bound,
        "update own project status": lambda c: update_status(c, "p1"),
        "update other project status": lambda c: update_status(c, "p2"),
        "create project": lambda c: c.projects.create(project("p9")),
        "update project spec": update_spec,
        "delete project": lambda c: c.projects.delete("p3"),
        "get own node": lambda c: c.nodes.get("n1"),
        "get other node": lambda c: c.nodes.get("n2"),
        "update node status": node_status,
        "renew lease": renew,
        "create event": event,
        "join node to group": lambda c: relabel(c, "joining", {v1.LABEL_NODE_GROUP: "gpu", "pool": "a100"}),
        "cordon group node": lambda c: relabel(c, "g1", {}, unschedulable=True),
        "cordon other node": lambda c: relabel(c, "n2", {}, unschedulable=True),
        "move node to other group": lambda c: relabel(c, "g2", {v1.LABEL_NODE_GROUP: "cpu"}),
        "force delete group node": lambda c: c.nodes.delete("g2", force=True),
        "delete group node": lambda c: c.nodes.delete("g1"),
        "delete node": lambda c: c.nodes.delete("n2", force=True),
        "get route": lambda c: c.resource(v1.Route).get("p2"),
        "list routes": lambda c: c.resource(v1.Route).list(),
        "create route": lambda c: c.resource(v1.Route).create(
            v1.Route(metadata=v1.ObjectMeta(name="p1"), spec=v1.RouteSpec(project="p1"))
        ),
    }


READS = {
    "get own project",
    "get other project",
    "list all projects",
    "list own projects",
    "watch own projects",
    "get own node",
    "get other node",
    "get route",
    "list routes",
}
CONTROLLER = READS | {
    "create project",  # the ProjectSet controller creates a set's replicas
    "update own project status",
    "update other project status",
    "delete project",
    "update node status",
    "renew lease",
    "create event",
    "update own event",
    "update other event",
    "create route",  # the routes controller derives them
}
ALLOWED: dict[str, set[str] | None] = {
    "admin": None,  # everything
    "controller:manager": CONTROLLER,
    # The autoscaler's exception (kinds.node.autoscaler_allows): join a node to a group, cordon and delete (never
    # forced) the nodes of groups; nothing else of Nodes.
    "controller:autoscaler": CONTROLLER | {"join node to group", "cordon group node", "delete group node"},
    # A node reads the projects it runs (lists and watches carry only those), every Node and every Route: its
    # ingress forwards any host to the node that runs the project, as the Route says.
    "node:n1": (READS - {"get other project"})
    | {"update own project status", "update node status", "renew lease", "create event", "update own event"},
    "viewer": READS,
}


@pytest.mark.parametrize("identity", sorted(ALLOWED))
async def test_authorization_matrix(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles], identity: str
) -> None:
    async with Client(secure_api.address, tls=tls_of("admin")) as admin:
        await _setup(admin)
        ops = _ops(admin)
        allowed = ALLOWED[identity]
        async with Client(secure_api.address, tls=tls_of(identity), retry_timeout=1) as c:
            for label, op in ops.items():
                expect_allowed = allowed is None or label in allowed
                if expect_allowed:
                    await asyncio.wait_for(op(c), 10)
                else:
                    with pytest.raises(Forbidden):
                        await asyncio.wait_for(op(c), 10)


async def test_bearer_tokens(secure_api: RunningApiServer, certs: Path) -> None:
    server_only = TLSFiles(ca=str(certs / "ca.crt"), cert=str(certs / "viewer.crt"), key=str(certs / "viewer.key"))
    async with Client(secure_api.address, tls=server_only, token="admin-token") as c:
        await c.projects.create(project("by-token"))  # the token's identity (admin group) wins over the cert
    async with Client(secure_api.address, tls=server_only, token="view-token") as c:
        assert [p.metadata.name for p in (await c.projects.list()).items] == ["by-token"]
        with pytest.raises(Forbidden):
            await c.projects.delete("by-token")
    async with Client(secure_api.address, tls=server_only, token="wrong") as c:
        with pytest.raises(Unauthenticated):
            await c.projects.list()


async def test_no_client_certificate_is_refused(secure_api: RunningApiServer, certs: Path) -> None:
    async with Client(secure_api.address, tls=TLSFiles(ca=str(certs / "ca.crt")), retry_timeout=0.5) as c:
        with pytest.raises(Unavailable):
            await c.projects.list()
    async with Client(secure_api.address, retry_timeout=0.5) as plain:  # plain TCP to a TLS port
        with pytest.raises(Unavailable):
            await plain.projects.list()


async def test_plain_tcp_only_on_loopback(etcd) -> None:  # type: ignore[no-untyped-def]  # the etcd fixture is left unannotated
    from caravanserai.testing.apiserver import start_apiserver

    with pytest.raises(ValueError, match="refusing plain TCP"):
        await start_apiserver(etcd.endpoint, listen="0.0.0.0:0")
    allowed = await start_apiserver(etcd.endpoint, listen="0.0.0.0:0", allow_insecure=True)
    await allowed.stop()


async def test_apiserver_talks_to_etcd_over_mutual_tls(tls_of: Callable[[str], TLSFiles]) -> None:
    from caravanserai.testing.apiserver import apiserver
    from caravanserai.testing.etcd import EtcdServer

    # The apiserver certificate (SANs localhost/127.0.0.1) serves etcd here; the apiserver's own client identity
    # is the admin certificate.
    async with EtcdServer(tls=tls_of("apiserver")) as secure_etcd:
        assert secure_etcd.endpoint.startswith("https://")
        with pytest.raises((TimeoutError, Unavailable)):  # no client certificate: etcd refuses the connection
            await start_plain(secure_etcd.endpoint)
        async with apiserver(secure_etcd.endpoint, etcd_tls=tls_of("admin")) as api, Client(api.address) as c:
            await c.projects.create(project("over-tls"))
            assert (await c.projects.get("over-tls")).status.phase == v1.PENDING


async def start_plain(endpoint: str) -> None:
    from caravanserai.testing.apiserver import start_apiserver

    running = await asyncio.wait_for(start_apiserver(endpoint), 8)
    await running.stop()


# ---- custom kinds: only admin manages definitions; admin and controllers write objects and status; others read;
# nodes get only the verbs a definition grants them.


def _custom_ops(admin: Client) -> dict[str, Op]:
    from support.customkinds import define_webfarm, webfarm, webfarm_messages

    sets = lambda c: c.resource(webfarm_messages().WebFarm)  # noqa: E731

    async def update_spec(c: Client) -> None:
        obj = await sets(admin).get("s1")
        obj.spec.replicas += 1
        await sets(c).update(obj)

    async def update_status(c: Client) -> None:
        obj = await sets(admin).get("s1")
        obj.status.ready_replicas += 1
        await sets(c).update_status(obj)

    async def redefine(c: Client) -> None:
        await define_webfarm(c, short_names=("wf", "wfarm"))

    async def watch(c: Client) -> None:
        async for _ in sets(c).watch(resource_version="0"):
            return

    return {
        "get set": lambda c: sets(c).get("s1"),
        "list sets": lambda c: sets(c).list(),
        "watch sets": watch,
        "create set": lambda c: sets(c).create(webfarm("s9")),
        "update set": update_spec,
        "update set status": update_status,
        "delete set": lambda c: sets(c).delete("s2"),
        "list definitions": lambda c: c.resourcedefinitions.list(),
        "update definition": redefine,
        "delete definition": lambda c: c.resourcedefinitions.delete("webfarms.example.com"),
    }


CUSTOM_READS = {"get set", "list sets", "watch sets", "list definitions"}
CUSTOM_ALLOWED: dict[str, set[str] | None] = {
    "admin": None,
    "controller:manager": CUSTOM_READS | {"create set", "update set", "update set status", "delete set"},
    "node:n1": {"get set"},  # the definition grants nodes `get` only
    "viewer": CUSTOM_READS,
}


@pytest.mark.parametrize("identity", sorted(CUSTOM_ALLOWED))
async def test_authorization_matrix_of_custom_kinds(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles], identity: str
) -> None:
    from support.customkinds import define_webfarm, webfarm, webfarm_messages

    async with Client(secure_api.address, tls=tls_of("admin")) as admin:
        await define_webfarm(admin, node_verbs=("get",))
        for name in ("s1", "s2"):
            await admin.resource(webfarm_messages().WebFarm).create(webfarm(name))
        allowed = CUSTOM_ALLOWED[identity]
        async with Client(secure_api.address, tls=tls_of(identity), retry_timeout=1) as c:
            for label, op in _custom_ops(admin).items():
                if allowed is None or label in allowed:
                    await asyncio.wait_for(op(c), 10)
                else:
                    with pytest.raises(Forbidden):
                        await asyncio.wait_for(op(c), 10)
