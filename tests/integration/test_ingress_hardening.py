"""The ingress against hostile clients, over real sockets on loopback: slow heads, slow bodies, idle connections,
too many connections, and forged forwarding headers. Outside clients come from 127.0.0.2 and up (the nodes
publish 127.0.0.1), so the proxies tell them from another node's ingress as they would across machines."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import AsyncIterator
from dataclasses import replace

import aiohttp
import pytest
from test_ingress_proxy import SHOP, StaticBackends, backend_app, node, serve, web_project

from caravanserai.agent.ingress.httpdetails import IngressLimits
from caravanserai.agent.ingress.proxy import IngressProxy
from caravanserai.agent.ingress.routes import RouteTable
from support.routes import route_for

OUTSIDE = "127.0.0.2"
SPOOFED = {
    "X-Forwarded-For": "6.6.6.6",
    "X-Forwarded-Host": "evil.example",
    "X-Forwarded-Proto": "https",
    "X-Forwarded-Port": "1",
    "Forwarded": "for=6.6.6.6;proto=https",
    "X-Caravanserai-Forwarded-By": "n2",
}


class Nodes:
    """Two nodes' proxies (n1 runs project shop) with `limits`; `url(node)` is a node's ingress."""

    def __init__(self, limits: IngressLimits) -> None:
        self.tables = {"n1": RouteTable(), "n2": RouteTable()}
        self.backends = StaticBackends()
        self.proxies = {n: IngressProxy(t, self.backends, node=n, limits=limits) for n, t in self.tables.items()}

    def url(self, name: str, path: str = "/echo") -> str:
        return f"http://127.0.0.1:{self.proxies[name].port}{path}"

    @property
    def port(self) -> int:
        return self.proxies["n1"].port


@contextlib.asynccontextmanager
async def nodes(**limits: object) -> AsyncIterator[Nodes]:
    c = Nodes(replace(IngressLimits(), **limits))  # type: ignore[arg-type]  # the test's own overrides
    app = await backend_app()
    async with serve(app) as backend, c.proxies["n1"].serving("127.0.0.1", 0), c.proxies["n2"].serving("127.0.0.1", 0):
        c.backends.addresses["default/shop"] = ("127.0.0.1", backend)
        for table in c.tables.values():
            for name, proxy in c.proxies.items():
                table.set_node(node(name, proxy.port))
            table.set_route(route_for(web_project("shop", node="n1")))
        yield c


def session_from(address: str) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=(address, 0), force_close=True))


async def echoed(c: Nodes, via: str, headers: dict[str, str], *, source: str = OUTSIDE) -> dict[str, str]:
    """The request headers the backend saw (as Echo-* response headers, without the prefix)."""
    async with session_from(source) as s, s.get(c.url(via), headers={**SHOP, **headers}) as r:
        assert r.status == 200, await r.text()
        return {k[len("Echo-") :]: v for k, v in r.headers.items() if k.startswith("Echo-")}


async def test_an_outside_client_cannot_forge_forwarding_headers() -> None:
    async with nodes() as c:
        local = await echoed(c, "n1", SPOOFED)
        assert local["X-Forwarded-For"] == OUTSIDE
        assert local["X-Forwarded-Host"] == "web.shop.local"  # the first hop's own, though it claimed a hop
        assert local["X-Forwarded-Proto"] == "http"
        assert not {"Forwarded", "X-Forwarded-Port", "X-Caravanserai-Forwarded-By"} & local.keys()
        spoofed_without_hop = {k: v for k, v in SPOOFED.items() if k != "X-Caravanserai-Forwarded-By"}
        forwarded = await echoed(c, "n2", spoofed_without_hop)  # n2 → n1: n1 keeps what n2 set
        assert forwarded["X-Forwarded-For"] == f"{OUTSIDE}, 127.0.0.1"
        assert forwarded["X-Forwarded-Host"] == "web.shop.local"
        assert forwarded["X-Forwarded-Proto"] == "http"
        assert not {"Forwarded", "X-Forwarded-Port"} & forwarded.keys()


async def test_a_trusted_proxy_keeps_its_forwarding_headers() -> None:
    async with nodes(trusted_proxies=(ipaddress.ip_network(f"{OUTSIDE}/32"),)) as c:
        seen = await echoed(c, "n1", {k: v for k, v in SPOOFED.items() if k != "X-Caravanserai-Forwarded-By"})
        assert seen["X-Forwarded-For"] == f"6.6.6.6, {OUTSIDE}"
        assert seen["X-Forwarded-Host"] == "evil.example, web.shop.local"
        assert seen["Forwarded"] == "for=6.6.6.6;proto=https"
        other = await echoed(c, "n1", SPOOFED, source="127.0.0.3")  # not the trusted one
        assert other["X-Forwarded-For"] == "127.0.0.3" and "Forwarded" not in other


async def connect(port: int, source: str = OUTSIDE) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
    """What the server sent before closing the connection, which must happen within `seconds`."""
    return await asyncio.wait_for(reader.read(), seconds)


async def test_a_head_trickled_slower_than_the_header_timeout_is_cut_off() -> None:
    async with nodes(header_timeout=0.5, keepalive_timeout=30) as c:
        reader, writer = await connect(c.port)
        writer.write(b"GET /echo HTTP/1.1\r\nHost: web.shop.local\r\n")
        started = asyncio.get_running_loop().time()

        async def trickle() -> None:
            with contextlib.suppress(ConnectionError):
                for _ in range(50):
                    writer.write(b"X-A: b\r\n")  # a byte of head now and then: never idle, never done
                    await asyncio.sleep(0.1)

        trickling = asyncio.create_task(trickle())
        try:
            assert await closed_within(reader, 3) == b""
            assert asyncio.get_running_loop().time() - started < 1.5
        finally:
            trickling.cancel()
            writer.close()


async def test_idle_connections_close_and_a_slow_keep_alive_client_is_served() -> None:
    async with nodes(header_timeout=0.5, keepalive_timeout=1.5) as c:
        reader, writer = await connect(c.port)  # sends nothing at all
        assert await closed_within(reader, 3) == b""
        writer.close()
        # Heads are timed from their first byte: requests 0.8 s apart on one connection are all answered.
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=(OUTSIDE, 0), limit=1)) as s:
            for _ in range(3):
                async with s.get(c.url("n1"), headers=SHOP) as r:
                    assert r.status == 200
                await asyncio.sleep(0.8)


async def test_a_body_that_stops_coming_ends_with_408() -> None:
    async with nodes(body_timeout=0.5) as c:
        reader, writer = await connect(c.port)
        writer.write(b"POST /echo HTTP/1.1\r\nHost: web.shop.local\r\nContent-Length: 100\r\n\r\n0123456789")
        answer = await closed_within(reader, 5)  # after 0.5 s, then at most 2 s for the rest of the body
        writer.close()
        assert answer.startswith(b"HTTP/1.1 408")
        assert b"body-timeout" in answer


async def test_connection_limits_refuse_the_excess_at_once_and_serve_others() -> None:
    async with nodes(max_connections=8, max_connections_per_client=5, keepalive_timeout=30) as c:
        held = [await connect(c.port) for _ in range(5)]
        await asyncio.sleep(0.1)
        assert c.proxies["n1"].guard.clients(OUTSIDE) == 5
        reader, writer = await connect(c.port)  # the sixth from the same address
        assert (await closed_within(reader, 1)).startswith(b"HTTP/1.1 503")
        writer.close()
        assert (await echoed(c, "n1", {}, source="127.0.0.3"))["X-Forwarded-For"] == "127.0.0.3"
        held[0][1].close()  # one goes: another may come
        await asyncio.sleep(0.2)
        held[0] = await connect(c.port)
        await asyncio.sleep(0.1)
        assert c.proxies["n1"].guard.clients(OUTSIDE) == 5
        # Node addresses count against the global limit only; at the global limit everyone is refused.
        held += [await connect(c.port, "127.0.0.1") for _ in range(3)]
        await asyncio.sleep(0.1)
        assert c.proxies["n1"].guard.open == 8
        reader, writer = await connect(c.port, "127.0.0.4")
        assert (await closed_within(reader, 1)).startswith(b"HTTP/1.1 503")
        writer.close()
        assert c.proxies["n1"].guard.refused == 2
        for _, w in held:
            w.close()


@pytest.mark.parametrize("limit", ["header_timeout", "body_timeout", "keepalive_timeout"])
def test_limits_have_bounded_defaults(limit: str) -> None:
    assert 0 < getattr(IngressLimits(), limit) <= 60
