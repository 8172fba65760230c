"""The ingress proxy over real sockets on loopback: two proxies (two "nodes") in front of aiohttp backends.

The route table is fed the projects and nodes an informer would deliver; `StaticBackends` (the `Backends` seam)
points local routes at loopback test servers, since a busybox container cannot speak WebSocket or stream SSE.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from caravanserai import v1
from caravanserai.agent.ingress.httpdetails import ERROR_HEADER, IngressLimits
from caravanserai.agent.ingress.proxy import BackendUnavailable, IngressProxy
from caravanserai.agent.ingress.routes import Route, RouteTable
from caravanserai.testing import free_port
from caravanserai.testing.builders import project
from support.routes import route_for

RELEASE = web.AppKey("release", asyncio.Event)


class StaticBackends:
    """Local routes go to fixed loopback addresses, keyed by project key ("default/shop")."""

    def __init__(self) -> None:
        self.addresses: dict[str, tuple[str, int]] = {}

    async def address(self, route: Route) -> tuple[str, int]:
        try:
            return self.addresses[route.project]
        except KeyError:
            raise BackendUnavailable("no container") from None

    def forget(self, route: Route) -> None:
        pass  # fixed addresses


def web_project(name: str, *, node: str, phase: str = v1.RUNNING, host: str = "web", scope: str = "") -> v1.Project:
    p = project(name)
    ingress = p.spec.ingress.add(name="web", host=host)
    ingress.target.service, ingress.target.port = p.spec.services[0].name, 8080
    ingress.access.scope = scope
    p.status.phase, p.status.node_ref = phase, node
    return p


def node(name: str, port: int) -> v1.Node:
    n = v1.Node()
    n.metadata.name = name
    n.status.network.addresses.add(type="InternalIP", address="127.0.0.1")
    n.status.network.ingress_port = port
    return n


async def backend_app() -> web.Application:
    async def echo(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {f"Echo-{k}": v for k, v in request.headers.items()}
        return web.Response(
            body=body,
            headers={
                **headers,
                "Peer-Port": str(request.transport.get_extra_info("peername")[1]),  # type: ignore[union-attr]  # a request being served has a transport
                "Connection": "X-Secret",
                "X-Secret": "hop",
            },
        )

    async def events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: one\n\n")
        await request.app[RELEASE].wait()
        await response.write(b"data: two\n\n")
        await response.write_eof()
        return response

    async def socket_echo(request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(protocols=("echo",))
        await ws.prepare(request)
        async for message in ws:
            if message.type == aiohttp.WSMsgType.TEXT:
                await ws.send_str(f"echo: {message.data}")
            elif message.type == aiohttp.WSMsgType.BINARY:
                await ws.send_bytes(message.data[::-1])
        return ws

    app = web.Application()
    app[RELEASE] = asyncio.Event()
    app.router.add_route("*", "/echo", echo)
    app.router.add_get("/events", events)
    app.router.add_get("/socket", socket_echo)
    return app


@contextlib.asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[int]:
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.create_server(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    try:
        yield sock.getsockname()[1]
    finally:
        await runner.cleanup()


class Cluster:
    """Two nodes' proxies sharing what the informers would tell them; project `shop` runs on n1."""

    def __init__(self) -> None:
        self.tables = {"n1": RouteTable(), "n2": RouteTable()}
        self.backends = StaticBackends()
        self.proxies = {
            n: IngressProxy(t, self.backends, node=n, limits=IngressLimits(max_request_body=1024))
            for n, t in self.tables.items()
        }
        self.app: web.Application | None = None

    def apply(self, obj: v1.Project | v1.Node) -> None:
        for table in self.tables.values():
            table.set_route(route_for(obj)) if isinstance(obj, v1.Project) else table.set_node(obj)

    def url(self, name: str, path: str = "/echo") -> str:
        return f"http://127.0.0.1:{self.proxies[name].port}{path}"


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    c = Cluster()
    c.app = await backend_app()
    async with (
        serve(c.app) as backend_port,
        c.proxies["n1"].serving("127.0.0.1", 0),
        c.proxies["n2"].serving("127.0.0.1", 0),
    ):
        c.backends.addresses["default/shop"] = ("127.0.0.1", backend_port)
        for name, proxy in c.proxies.items():
            c.apply(node(name, proxy.port))
        c.apply(web_project("shop", node="n1"))
        yield c
        c.app[RELEASE].set()


SHOP = {"Host": "web.shop.local"}


@pytest.mark.parametrize("via", ["n1", "n2"])
async def test_request_reaches_the_backend_from_any_node(cluster: Cluster, via: str) -> None:
    async with aiohttp.ClientSession() as session:
        headers = {"Host": "Web.Shop.Local:8081", "Connection": "keep-alive, X-Drop", "X-Drop": "1", "X-Keep": "2"}
        async with session.post(cluster.url(via), data=b"ping", headers=headers) as response:
            assert response.status == 200
            assert await response.read() == b"ping"
            seen = response.headers
    assert seen["Echo-Host"] == "Web.Shop.Local:8081"  # the original Host is kept
    assert seen["Echo-X-Keep"] == "2" and "Echo-X-Drop" not in seen  # named in Connection: hop-by-hop
    assert "X-Secret" not in seen  # the backend's Connection-listed header does not reach the client
    expected_for = "127.0.0.1" if via == "n1" else "127.0.0.1, 127.0.0.1"  # one entry per proxy
    assert seen["Echo-X-Forwarded-For"] == expected_for
    assert seen["Echo-X-Forwarded-Host"] == "Web.Shop.Local:8081"
    assert seen["Echo-X-Forwarded-Proto"] == "http"
    assert "Echo-X-Caravanserai-Forwarded-By" not in seen  # the loop guard never reaches the backend


async def test_head_and_empty_responses(cluster: Cluster) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.head(cluster.url("n2"), headers=SHOP) as response:
            assert response.status == 200 and await response.read() == b""
        async with session.get(cluster.url("n2"), headers=SHOP) as response:  # the connection is still usable
            assert response.status == 200 and await response.read() == b""


async def test_keep_alive_reuses_one_backend_connection(cluster: Cluster) -> None:
    connector = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=connector) as session:
        ports = []
        for _ in range(3):
            async with session.get(cluster.url("n1"), headers=SHOP) as response:
                assert response.status == 200
                ports.append(response.headers["Peer-Port"])
                await response.read()
    assert len(set(ports)) == 1  # the proxy kept its connection to the backend alive


async def test_streamed_response_arrives_before_it_ends(cluster: Cluster) -> None:
    assert cluster.app is not None
    async with aiohttp.ClientSession() as session, session.get(cluster.url("n2", "/events"), headers=SHOP) as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        first = await asyncio.wait_for(response.content.readuntil(b"\n\n"), 5)
        assert first == b"data: one\n\n"  # delivered while the backend still holds the stream open
        cluster.app[RELEASE].set()
        assert await response.content.read() == b"data: two\n\n"


async def test_chunked_upload_streams_through(cluster: Cluster) -> None:
    async def body() -> AsyncIterator[bytes]:
        for part in (b"a" * 100, b"b" * 100):
            yield part

    async with (
        aiohttp.ClientSession() as session,
        session.post(cluster.url("n2"), data=body(), headers=SHOP) as response,
    ):
        assert await response.read() == b"a" * 100 + b"b" * 100


async def test_request_size_limit(cluster: Cluster) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(cluster.url("n1"), data=b"x" * 2048, headers=SHOP) as response,
    ):
        assert response.status == 413
        assert response.headers[ERROR_HEADER] == "request-too-large"


@pytest.mark.parametrize("via", ["n1", "n2"])
async def test_websocket_echo(cluster: Cluster, via: str) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(cluster.url(via, "/socket").replace("http", "ws"), headers=SHOP, protocols=("echo",)) as ws,
    ):
        assert ws.protocol == "echo"
        await ws.send_str("hello")
        assert await ws.receive_str(timeout=5) == "echo: hello"
        await ws.send_bytes(b"abc")
        assert await ws.receive_bytes(timeout=5) == b"cba"


async def test_error_pages(cluster: Cluster) -> None:
    cluster.apply(web_project("off", node="n1", phase=v1.FAILED))
    cluster.apply(web_project("gone", node="n1"))  # Running, but its container has no address
    cluster.apply(web_project("moved", node="n3"))  # a node without a published ingress
    cluster.backends.addresses["default/dead"] = ("127.0.0.1", free_port())  # nothing listens there: connection refused
    cluster.apply(web_project("dead", node="n1"))
    cases = [
        ("nowhere.example", 404, "unknown-host", "nowhere.example"),
        ("web.off.local", 503, "not-running", 'Project "off" is Failed'),
        ("web.gone.local", 503, "no-backend", "no container"),
        ("web.moved.local", 502, "node-unreachable", "node n3"),
        ("web.dead.local", 502, "backend-refused", 'Project "dead"'),
    ]
    async with aiohttp.ClientSession() as session:
        for host, status, error, text in cases:
            async with session.get(cluster.url("n1"), headers={"Host": host}) as response:
                page = await response.text()
                assert (response.status, response.headers[ERROR_HEADER]) == (status, error), page
                assert text in page and response.content_type == "text/html"


async def test_a_forwarded_request_is_never_forwarded_again(cluster: Cluster) -> None:
    # n2 believes shop runs on n1 and n1 believes it runs on n2: a loop, if forwarding were repeated.
    moved = web_project("shop", node="n2")
    cluster.tables["n1"].set_route(route_for(moved))
    async with aiohttp.ClientSession() as session, session.get(cluster.url("n2"), headers=SHOP) as response:
        assert response.status == 502
        assert response.headers[ERROR_HEADER] == "misrouted"
        assert "node n2 forwarded the request" in await response.text()


async def test_internal_routes_refuse_outside_clients(cluster: Cluster) -> None:
    cluster.apply(web_project("open", node="n1", scope="Public"))  # neither has a backend: 503 once allowed
    cluster.apply(web_project("inner", node="n1", scope="Internal"))
    proxy = cluster.proxies["n1"]

    def request(host: str, peer: str) -> web.Request:
        info = {"peername": (peer, 40000)}
        transport = type("Transport", (), {"get_extra_info": lambda self, key, default=None: info.get(key, default)})()
        return make_mocked_request("GET", "/", headers={"Host": host}, transport=transport)

    refused = await proxy.handle(request("web.inner.local", "192.0.2.7"))
    assert (refused.status, refused.headers[ERROR_HEADER]) == (403, "internal-only")
    public = await proxy.handle(request("web.open.local", "192.0.2.7"))
    assert (public.status, public.headers[ERROR_HEADER]) == (503, "no-backend")  # past the scope check
    cluster.tables["n1"].set_node(_with_address(node("n9", 0), "192.0.2.7"))  # now a node address
    inside = await proxy.handle(request("web.inner.local", "192.0.2.7"))
    assert (inside.status, inside.headers[ERROR_HEADER]) == (503, "no-backend")


def _with_address(n: v1.Node, address: str) -> v1.Node:
    del n.status.network.addresses[:]
    n.status.network.addresses.add(type="InternalIP", address=address)
    return n
