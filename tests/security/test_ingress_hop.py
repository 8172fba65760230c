"""Internal ingress routes trust the forwarding node's identity, never an address a node reported: a client at a
node's reported address is refused, a hop signed by another agent's node certificate (deploy/certs.sh, the
cluster CA) is served, and a hop altered, replayed late or signed by a certificate that is no node's is not."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict
from yarl import URL

from caravanserai import v1
from caravanserai.agent.ingress.hop import HOP, HOP_CERT, MAX_SKEW, HopAuth
from caravanserai.agent.ingress.httpdetails import ERROR_HEADER
from caravanserai.agent.ingress.proxy import BackendUnavailable, IngressProxy
from caravanserai.agent.ingress.routes import Route, RouteTable
from caravanserai.clock import SystemClock
from caravanserai.process.tls import TLSFiles
from caravanserai.testing.builders import project
from caravanserai.testing.clock import FakeClock
from support.routes import route_for

OUTSIDE = "192.0.2.7"  # an address some node reported as its own
HOST = "web.inner.local"
PATH = "/x/%7Ea?q=a%20b&r=%2F&s=1"  # escapes survive the hop unchanged, or the signature would not match


class NoBackends:
    async def address(self, route: Route) -> tuple[str, int]:
        raise BackendUnavailable("no container")  # 503 no-backend: the request got past the scope check

    def forget(self, route: Route) -> None:
        pass


def _auth(tls: TLSFiles, node: str, clock: Any = None) -> HopAuth:
    read = Path
    return HopAuth(
        node,
        cert_pem=read(tls.cert).read_bytes(),
        key_pem=read(tls.key).read_bytes(),
        ca_pem=read(tls.ca).read_bytes(),
        clock=clock or SystemClock(),
    )


def _node(name: str, address: str, port: int) -> v1.Node:
    n = v1.Node()
    n.metadata.name = name
    n.status.network.addresses.add(type="InternalIP", address=address)
    n.status.network.ingress_port = port
    return n


def _table(capture_port: int) -> RouteTable:
    table = RouteTable()
    p = project("inner")
    route = p.spec.ingress.add(name="web", host="web")
    route.target.service, route.target.port, route.access.scope = p.spec.services[0].name, 8080, "Internal"
    p.status.phase, p.status.node_ref = v1.RUNNING, "n1"
    table.set_route(route_for(p))
    table.set_node(_node("n1", "127.0.0.1", capture_port))  # where n2 forwards: the capture server
    table.set_node(_node("n2", "127.0.0.1", 1))
    table.set_node(_node("n9", OUTSIDE, 1))  # a node (perhaps a rogue one) that reported the outside address
    return table


def _from(headers: CIMultiDict[str] | dict[str, str], peer: str = OUTSIDE, path: str = PATH) -> web.Request:
    info = {"peername": (peer, 40000)}
    transport = type("Transport", (), {"get_extra_info": lambda self, key, default=None: info.get(key, default)})()
    return make_mocked_request("GET", path, headers=headers, transport=transport)


@contextlib.asynccontextmanager
async def _capture() -> AsyncIterator[tuple[int, list[web.Request]]]:
    seen: list[web.Request] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request)
        return web.Response(text="captured")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield runner.addresses[0][1], seen
    finally:
        await runner.cleanup()


async def _forwarded_by_n2(tls_of: Callable[[str], TLSFiles]) -> tuple[CIMultiDict[str], str]:
    """The headers and path of a request for the Internal host as n2's ingress really forwards it towards n1."""
    async with _capture() as (port, seen):
        n2 = IngressProxy(_table(port), NoBackends(), node="n2", hops=_auth(tls_of("node:n2"), "n2"))
        async with n2.serving("127.0.0.1", 0), aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{n2.port}{PATH}"
            async with session.get(URL(url, encoded=True), headers={"Host": HOST}) as response:
                assert await response.text() == "captured"
        return CIMultiDict(seen[0].headers), seen[0].raw_path


async def _answer(proxy: IngressProxy, request: web.Request) -> tuple[int, str]:
    response = await proxy.handle(request)
    return response.status, response.headers.get(ERROR_HEADER, "")


@pytest.fixture
def n1(tls_of: Callable[[str], TLSFiles]) -> IngressProxy:
    return IngressProxy(_table(1), NoBackends(), node="n1", hops=_auth(tls_of("node:n1"), "n1"))


async def test_a_reported_node_address_is_no_proof_but_a_signed_hop_is(
    n1: IngressProxy, tls_of: Callable[[str], TLSFiles]
) -> None:
    assert await _answer(n1, _from({"Host": HOST})) == (403, "internal-only")
    forwarded, path = await _forwarded_by_n2(tls_of)
    assert forwarded[HOP].startswith("n2;") and forwarded[HOP_CERT]
    assert await _answer(n1, _from(forwarded, path=path)) == (503, "no-backend")  # inside: past the scope check
    assert await _answer(n1, _from({"Host": HOST}, peer="127.0.0.1")) == (503, "no-backend")  # this machine


async def test_an_altered_late_or_non_node_hop_is_refused(n1: IngressProxy, tls_of: Callable[[str], TLSFiles]) -> None:
    forwarded, path = await _forwarded_by_n2(tls_of)
    assert await _answer(n1, _from(forwarded, path=path)) == (503, "no-backend")  # as received: inside
    assert await _answer(n1, _from(forwarded, path="/admin")) == (403, "internal-only")  # another path
    other_host = CIMultiDict(forwarded)
    other_host["Host"] = "web.other.local"
    assert (await n1.handle(_from(other_host))).status == 404  # unknown host; the signature would not match either
    claimed = CIMultiDict(forwarded)
    claimed[HOP] = "n9;" + forwarded[HOP].split(";", 1)[1]  # n2's certificate, claiming to be n9
    assert await _answer(n1, _from(claimed, path=path)) == (403, "internal-only")

    late = FakeClock(start=time.time() + MAX_SKEW + 5)  # the same hop, replayed after its window
    stale = IngressProxy(_table(1), NoBackends(), node="n1", hops=_auth(tls_of("node:n1"), "n1", clock=late))
    assert await _answer(stale, _from(forwarded, path=path)) == (403, "internal-only")

    viewer = _auth(tls_of("viewer"), "n2")  # signs correctly, but its certificate names no node
    signed = {"Host": HOST, **viewer.sign(to="n1", method="GET", host=HOST, path=path)}
    assert await _answer(n1, _from(signed, path=path)) == (403, "internal-only")
