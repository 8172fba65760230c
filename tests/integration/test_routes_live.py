"""The routes controller against a real apiserver and etcd: Routes derived at start for projects made before it
(the upgrade), following a move with its hand-off and a node's new address, gone with the ingress or the project."""

from __future__ import annotations

from cluster_sim import add_node, running_manager

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controllers.routes import app as routes_app
from caravanserai.errors import NotFound
from caravanserai.project import lifecycle
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

CLOCK = SystemClock()


def exposed(name: str) -> v1.Project:
    p = project(name, services=["web"])
    ingress = p.spec.ingress.add(name="site", host="web")
    ingress.target.service, ingress.target.port = "web", 8080
    return p


async def addressed(client: Client, name: str, address: str) -> None:
    n = await client.nodes.get(name)
    del n.status.network.addresses[:]
    n.status.network.addresses.add(type="InternalIP", address=address)
    n.status.network.ingress_port = 8081
    await client.nodes.update_status(n)


async def route_of(client: Client, name: str) -> v1.Route | None:
    try:
        return await client.resource(v1.Route).get(name)
    except NotFound:
        return None


async def test_routes_follow_projects_and_nodes(client: Client) -> None:
    for name, address in (("n1", "10.0.0.1"), ("n2", "10.0.0.2")):
        await add_node(client, name)
        await addressed(client, name, address)
    before = await client.projects.create(exposed("shop"))  # made before the controller runs: the upgrade
    await client.projects.update_status(lifecycle.bind(before, "n1", now=CLOCK.now()))
    await client.projects.create(project("plain"))  # no ingress: no Route
    async with running_manager(client, lambda m: routes_app.setup(m, client, CLOCK)):

        async def on(node: str, previous: str = "") -> v1.Route | None:
            route = await route_of(client, "shop")
            if route is None or (route.spec.node.node, route.spec.previous_node.node) != (node, previous):
                return None
            return route

        route = await wait_for(lambda: on("n1"), 5, message="the Route of a project made before the controller")
        assert route.spec.node.address == "10.0.0.1" and route.spec.hosts[0].host == "web.shop.local"
        assert meta.controller_of(route).uid == before.metadata.uid  # type: ignore[union-attr]  # owned by it
        assert await route_of(client, "plain") is None

        await addressed(client, "n1", "10.0.0.9")  # the node's address changes: so does the Route

        async def readdressed() -> bool:
            found = await on("n1")
            return found is not None and found.spec.node.address == "10.0.0.9"

        await wait_for(readdressed, 5, message="the Route to follow the node's address")

        p = await client.projects.get("shop")
        p = await client.projects.update_status(lifecycle.run(p, reason="Started", message="", now=CLOCK.now()))
        moved = lifecycle.return_to_pending(
            p, reason="Drained", message="", now=CLOCK.now(), handoff_until=CLOCK.now() + 300
        )
        p = await client.projects.update_status(moved)
        await client.projects.update_status(lifecycle.bind(p, "n2", now=CLOCK.now()))
        route = await wait_for(lambda: on("n2", "n1"), 5, message="the Route to follow the move and its hand-off")
        assert (route.spec.node.address, route.spec.previous_node.address) == ("10.0.0.2", "10.0.0.9")

        p = await client.projects.get("shop")
        del p.spec.ingress[:]
        await client.projects.update(p)

        async def gone() -> bool:
            return await route_of(client, "shop") is None

        await wait_for(gone, 5, message="the Route to go with the ingress")
        p = await client.projects.get("shop")
        p.spec.ingress.add(name="site", host="web").target.service = "web"
        p.spec.ingress[0].target.port = 8080
        await client.projects.update(p)
        await wait_for(lambda: on("n2", "n1"), 5, message="the Route back with the ingress")
        await client.projects.delete("shop", force=True)
        await wait_for(gone, 5, message="the Route to go with the project")
