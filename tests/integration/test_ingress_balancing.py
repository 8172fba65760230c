"""The ingress balancing over real sockets: two proxies ("nodes"), one loopback server per replica.

Replicas are projects with one controller owner declaring the same host; each node's `StaticBackends` (of the proxy
tests) points a project's route at the server of that node's copy, which answers with its own name.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from test_ingress_proxy import StaticBackends, node, serve

from caravanserai import v1
from caravanserai.agent.ingress.httpdetails import ERROR_HEADER, IngressLimits
from caravanserai.agent.ingress.proxy import IngressProxy
from caravanserai.agent.ingress.routes import RouteTable
from caravanserai.testing import free_port
from caravanserai.testing.builders import project
from caravanserai.testing.clock import FakeClock
from support.routes import route_for

HOST = {"Host": "app.example.com"}
NOW = 1000.0


def replica(
    name: str, *, node_name: str, ready: bool = True, phase: str = v1.RUNNING, owner: str = "set"
) -> v1.Project:
    p = project(name, services=["web"])
    p.metadata.creation_timestamp.seconds = int(name[-1]) if name[-1].isdigit() else 0
    if owner:
        p.metadata.owner_references.add(kind="ProjectSet", name="app", uid=owner, controller=True)
    ingress = p.spec.ingress.add(name="site", host="app.example.com")
    ingress.target.service, ingress.target.port = "web", 8080
    ingress.access.scope = "Public"
    p.status.phase, p.status.node_ref = phase, node_name
    p.status.services.add(name="web", container_id="c-" + name, ready=ready)
    return p


def named(name: str) -> web.Application:
    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text=name)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    return app


class Nodes:
    def __init__(self) -> None:
        self.tables = {"n1": RouteTable(), "n2": RouteTable()}
        self.backends = {n: StaticBackends() for n in self.tables}
        self.servers: dict[str, tuple[str, int]] = {}  # server name → its address
        self.proxies = {
            n: IngressProxy(t, self.backends[n], node=n, limits=IngressLimits(), clock=FakeClock(start=NOW))
            for n, t in self.tables.items()
        }

    def place(self, project: str, *, on: str, server: str) -> None:
        """The copy of `project` (of `default`) on node `on` is served by `server` (a name of `servers`, else a closed
        port)."""
        self.backends[on].addresses[f"default/{project}"] = self.servers.get(server) or ("127.0.0.1", free_port())

    def apply(self, obj: v1.Project | v1.Node, *, only: str = "") -> None:
        for name, table in self.tables.items():
            if not only or name == only:
                table.set_route(route_for(obj)) if isinstance(obj, v1.Project) else table.set_node(obj)

    async def get(
        self, via: str, *, method: str = "GET", body: bytes | None = None, times: int = 1
    ) -> Counter[tuple[int, str]]:
        seen: Counter[tuple[int, str]] = Counter()
        url = f"http://127.0.0.1:{self.proxies[via].port}/"
        async with aiohttp.ClientSession() as session:
            for _ in range(times):
                async with session.request(method, url, headers=HOST, data=body) as response:
                    text = await response.text()
                    seen[(response.status, text if response.status == 200 else response.headers[ERROR_HEADER])] += 1
        return seen


@pytest.fixture
async def nodes() -> AsyncIterator[Nodes]:
    c = Nodes()
    async with contextlib.AsyncExitStack() as stack:
        for name in ("r1", "r2", "r3"):
            c.servers[name] = ("127.0.0.1", await stack.enter_async_context(serve(named(name))))
            c.place(name, on="n1", server=name)
            c.place(name, on="n2", server=name)
        for proxy in c.proxies.values():
            await stack.enter_async_context(proxy.serving("127.0.0.1", 0))
        for name, proxy in c.proxies.items():
            c.apply(node(name, proxy.port))
        yield c


@pytest.mark.parametrize("via", ["n1", "n2"])
async def test_every_ready_replica_on_any_node_answers(nodes: Nodes, via: str) -> None:
    nodes.apply(replica("r1", node_name="n1"))
    nodes.apply(replica("r2", node_name="n1"))
    nodes.apply(replica("r3", node_name="n2"))
    assert await nodes.get(via, times=9) == Counter({(200, "r1"): 3, (200, "r2"): 3, (200, "r3"): 3})
    nodes.apply(replica("r2", node_name="n1", ready=False))  # not ready: skipped
    assert await nodes.get(via, times=4) == Counter({(200, "r1"): 2, (200, "r3"): 2})


async def test_a_replica_that_refuses_is_followed_by_another(nodes: Nodes) -> None:
    nodes.place("r2", on="n1", server="gone")  # its container is gone; the table says ready
    nodes.apply(replica("r1", node_name="n1"))
    nodes.apply(replica("r2", node_name="n1"))
    for method in ("GET", "POST"):  # a refused connect never reached it: even a POST goes to another copy
        assert await nodes.get("n1", method=method, body=b"order", times=6) == Counter({(200, "r1"): 6})
    nodes.apply(replica("r1", node_name="n1", ready=False))  # none ready: every running copy is tried
    nodes.apply(replica("r2", node_name="n1", ready=False))
    assert (await nodes.get("n1", times=4))[(200, "r1")] == 4


async def test_a_node_that_reached_no_copy_is_followed_by_another(nodes: Nodes) -> None:
    nodes.apply(replica("r1", node_name="n1"))
    nodes.apply(replica("r3", node_name="n2"))
    nodes.apply(replica("r3", node_name="n2", phase=v1.TERMINATING), only="n2")  # n2 knows first: r3 is going
    assert await nodes.get("n1", method="POST", times=6) == Counter({(200, "r1"): 6})  # n2 reached no container
    sent = await nodes.get("n1", method="POST", body=b"order", times=6)  # its body went to n2: not sent again
    assert sent == Counter({(200, "r1"): 3, (502, "misrouted"): 3})
    nodes.place("r3", on="n2", server="gone")  # n2 still routes r3 but its container refuses
    nodes.apply(replica("r3", node_name="n2"), only="n2")
    assert await nodes.get("n1", times=6) == Counter({(200, "r1"): 6})


async def test_unrelated_projects_on_one_host_keep_first_wins(nodes: Nodes) -> None:
    nodes.apply(replica("r1", node_name="n1", owner=""))
    nodes.apply(replica("r2", node_name="n2", owner=""))  # younger and unrelated: never served
    assert await nodes.get("n2", times=4) == Counter({(200, "r1"): 4})


async def test_a_project_handed_over_is_served_by_its_old_copy_until_the_new_is_ready(nodes: Nodes) -> None:
    moving = replica("r1", node_name="", phase=v1.PENDING, owner="")
    moving.status.previous_node_ref = "n1"
    moving.status.handoff_deadline.seconds = int(NOW + 60)
    nodes.apply(moving)
    assert await nodes.get("n2", times=2) == Counter({(200, "r1"): 2})  # forwarded to n1, which still runs it
    nodes.place("r1", on="n2", server="r3")  # the new copy on n2 is another container
    starting = replica("r1", node_name="n2", ready=False, owner="")
    starting.status.previous_node_ref = "n1"
    starting.status.handoff_deadline.seconds = int(NOW + 60)
    nodes.apply(starting)
    assert await nodes.get("n2", times=2) == Counter({(200, "r1"): 2})  # not ready: still n1's old copy
    nodes.apply(replica("r1", node_name="n2", owner=""))  # ready: the hand-off ends, n2 serves
    assert await nodes.get("n1", times=2) == Counter({(200, "r3"): 2})
    expired = replica("r1", node_name="", phase=v1.PENDING, owner="")
    expired.status.previous_node_ref = "n1"
    expired.status.handoff_deadline.seconds = int(NOW - 1)
    nodes.apply(expired)
    assert await nodes.get("n1") == Counter({(503, "not-running"): 1})
