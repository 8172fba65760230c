"""The routes controller (`controllers/routes`): one Route per project with an ingress, written only on change,
following the project's node, its hand-off and the nodes' endpoints; removed with the ingress or the project."""

from __future__ import annotations

from typing import Any

from caravanserai import meta, v1
from caravanserai.controllers.routes.app import ROUTED_NODES_INDEX, node_changes, routed_key, routed_nodes
from caravanserai.controllers.routes.reconciler import RouteReconciler
from caravanserai.informer import Indexer
from caravanserai.testing.builders import project
from caravanserai.testing.fakeclient import FakeClient


def machine(name: str, address: str, port: int = 8081) -> v1.Node:
    n = v1.Node(metadata=v1.ObjectMeta(name=name))
    n.status.network.addresses.add(type="InternalIP", address=address)
    n.status.network.ingress_port = port
    return n


def exposed(name: str, node: str, *, namespace: str = "default") -> v1.Project:
    p = project(name, services=["web"], namespace=namespace)
    p.metadata.uid = f"uid-{name}"
    ingress = p.spec.ingress.add(name="site", host="web")
    ingress.target.service, ingress.target.port = "web", 8080
    p.status.phase, p.status.node_ref = v1.RUNNING, node
    return p


class World:
    """The controller's caches, fed by hand, and a FakeClient it writes Routes to (mirrored into its cache)."""

    def __init__(self) -> None:
        self.client = FakeClient()
        self.projects: Indexer[v1.Project] = Indexer({ROUTED_NODES_INDEX: routed_nodes})
        self.nodes: Indexer[v1.Node] = Indexer()
        self.routes: Indexer[v1.Route] = Indexer()
        self.reconciler = RouteReconciler(self.client, self.projects, self.nodes, self.routes)  # type: ignore[arg-type]  # the fake has the client's verbs

    def put(self, obj: Any) -> None:
        cache = {v1.Project: self.projects, v1.Node: self.nodes}[type(obj)]
        cache.upsert(meta.key_of(obj), obj)  # type: ignore[attr-defined]  # one of the two caches

    async def reconcile(self, key: str) -> v1.Route | None:
        await self.reconciler.reconcile(key)
        stored = {meta.key_of(r): r for r in (await self.client.resource(v1.Route).list()).items}
        for gone in set(self.routes.keys()) - set(stored):
            self.routes.delete(gone)
        for k, r in stored.items():
            self.routes.upsert(k, r)
        return stored.get(key)


async def test_a_route_is_derived_once_and_follows_its_project() -> None:
    world = World()
    world.put(machine("n1", "10.0.0.1"))
    world.put(machine("n2", "10.0.0.2"))
    world.put(exposed("shop", "n1", namespace="team-a"))
    route = await world.reconcile("team-a/shop")
    assert route is not None and route.spec.node.address == "10.0.0.1" and world.reconciler.writes == 1
    assert route.spec.hosts[0].host == "web.shop.team-a.local"
    await world.reconcile("team-a/shop")
    assert world.reconciler.writes == 1  # nothing changed: nothing written
    world.put(exposed("shop", "n2", namespace="team-a"))  # moved
    route = await world.reconcile("team-a/shop")
    assert route is not None and (route.spec.node.node, route.spec.node.address) == ("n2", "10.0.0.2")
    assert world.reconciler.writes == 2


async def test_a_route_goes_with_the_ingress_or_the_project() -> None:
    world = World()
    world.put(exposed("shop", "n1"))
    assert await world.reconcile("default/shop") is not None
    plain = exposed("shop", "n1")
    del plain.spec.ingress[:]
    world.put(plain)
    assert await world.reconcile("default/shop") is None
    world.put(exposed("shop", "n1"))
    assert await world.reconcile("default/shop") is not None
    world.projects.delete("default/shop")
    assert await world.reconcile("default/shop") is None
    assert await world.reconcile("default/shop") is None  # already gone: nothing to do
    assert world.reconciler.writes == 4


async def test_a_route_edited_by_hand_is_put_back() -> None:
    world = World()
    world.put(exposed("shop", "n1"))
    route = await world.reconcile("default/shop")
    assert route is not None
    route.spec.node.node = "elsewhere"
    world.routes.upsert("default/shop", await world.client.resource(v1.Route).update(route))
    restored = await world.reconcile("default/shop")
    assert restored is not None and restored.spec.node.node == "n1"


class Keys:
    def __init__(self) -> None:
        self.keys: list[str] = []

    def add(self, key: str) -> None:
        self.keys.append(key)


def test_only_a_changed_endpoint_wakes_the_projects_of_a_node() -> None:
    projects: Indexer[v1.Project] = Indexer({ROUTED_NODES_INDEX: routed_nodes})
    handed = exposed("moving", "n2")
    handed.status.previous_node_ref = "n1"
    for p in (exposed("shop", "n1"), handed, exposed("other", "n2")):
        projects.upsert(meta.key_of(p), p)
    plain = exposed("plain", "n1")
    del plain.spec.ingress[:]
    projects.upsert(meta.key_of(plain), plain)
    queue = Keys()
    handler = node_changes(projects)(queue)  # type: ignore[arg-type]  # the handler only adds keys
    assert handler.on_update is not None
    before = machine("n1", "10.0.0.1")
    beat = meta.copy(before)
    beat.status.state = v1.NODE_READY  # a heartbeat: the endpoint is the same
    handler.on_update(before, beat)
    assert queue.keys == []
    handler.on_update(before, machine("n1", "10.0.0.9"))
    assert sorted(queue.keys) == ["default/moving", "default/shop"]


def test_projects_without_ingress_are_not_queued() -> None:
    plain = exposed("plain", "n1")
    del plain.spec.ingress[:]
    assert list(routed_key(plain)) == [] and list(routed_key(exposed("shop", "n1"))) == ["default/shop"]
