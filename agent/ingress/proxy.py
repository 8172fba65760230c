"""The ingress reverse proxy (aiohttp server and client): any node answers for any host.

    proxy = IngressProxy(table, backends, node="node-1", limits=IngressLimits())
    async with proxy.serving("0.0.0.0", 8081):
        ...

Guarantees for a request with `Host: H`:

* H unknown → **404** naming H. H's route is `Internal` and the client is not inside → **403**. Inside means: on
  loopback or on this node's own address (a process of this machine), or a hop another node's agent signed with
  its node certificate (`ingress.hop`), never an address a node reported. Without node certificates (`hops`
  None: nothing in the cluster is authenticated) any node's reported address counts, as before. No copy of H's
  project runs → **503** naming the project and its phase.
* H is served by the copies `balance.serving` names: every ready replica of a replicated project (projects of one
  owner declaring H), on any node; the old copy of a project being handed over until its new copy is ready. The
  balancer (`balance.Balancer`: least connections, then round robin) picks one; a copy that did not get the request
  (or, for an idempotent method, broke the connection before answering) is followed by another copy, before any
  byte of the response went to the client (`balance.may_retry_*`).
* The copy runs on this node → the request goes to the target service's container on the project network
  (`backends` says where); a refused or unresolvable backend → **502**/**503**; a container that does not accept
  the connection within `local_connect_timeout` (0.5 s: on the node's own bridge, silence means it is stopped or
  restarting) → **503** at once, naming the service, instead of a request hanging; no headers from it in time →
  **504**. A container that refused a connection but has another address now (replaced by a start-first update)
  is tried once more at its new address.
* The copy runs on another node → the request is forwarded once, to that node's ingress over its published
  address, marked with `X-Caravanserai-Forwarded-By`. A marked request is never forwarded again (**502** when
  no copy runs here): loops are impossible. The mark counts as a hop from another node only
  with a valid hop signature (`_from_node`; without node certificates, from a node's address); from anyone else
  it is dropped with the client's `X-Forwarded-*` and `Forwarded` (kept from `trusted_proxies`), and this node
  sets its own as the first hop.
* HTTP/1.1 keep-alive on both sides (the client connection pool is kept per backend); bodies stream in both
  directions as they come (chunked uploads, server-sent events); WebSocket upgrades are proxied message by
  message; hop-by-hop headers are dropped and X-Forwarded-* set (see `ingress.httpdetails`).
* Limits (`IngressLimits`): a request body over `max_request_body` is refused with **413** (or cut off when it
  grows past it while streaming); a response over `max_response_body` is cut off; no byte for `idle_timeout`
  seconds ends the exchange.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import aiohttp
import structlog
from aiohttp import hdrs, web
from multidict import CIMultiDict
from yarl import URL

from caravanserai.agent.ingress.balance import (
    MAX_ATTEMPTS,
    Backend,
    Balancer,
    may_retry_failure,
    may_retry_page,
    never_sent,
    serving,
)
from caravanserai.agent.ingress.guard import ConnectionGuard, RateLimitedLog, RepeatFilter
from caravanserai.agent.ingress.hop import HOP_HEADERS, HopAuth
from caravanserai.agent.ingress.httpdetails import (
    ERROR_HEADER,
    FORWARDED_BY,
    WEBSOCKET_HANDSHAKE,
    IngressLimits,
    IPNetwork,
    end_to_end,
    error_page,
    is_websocket,
    upstream_headers,
)
from caravanserai.agent.ingress.relaying import BodyTooLarge, BodyTooSlow, RequestBody, pump_websockets
from caravanserai.agent.ingress.routes import Route, RouteTable
from caravanserai.clock import Clock, SystemClock

log = structlog.get_logger(__name__)

BACKLOG = 1024
REROUTE_WAIT = 1.0  # seconds a request every copy refused waits for this node's routes to change (then once more)
REROUTE_POLL = 0.05
STALE_ROUTE_ERRORS = frozenset({"misrouted", "not-running", "no-backend"})  # a peer's answers its routes differ
LINGERING = 2.0  # seconds to read and drop an unread request body after answering early (aiohttp's default: 10)
QUIETED_LOGGERS = ("asyncio", "aiohttp.server", "aiohttp.web")  # their repeated lines are rate-limited (`guard`)

SMALL_BODY = 64 * 1024  # responses up to this size (with a Content-Length) are relayed in one piece
_HOP_VERDICT = web.RequestKey("caravanserai.hop_verified", bool)  # a request's hop verdict (`_signed_hop`)


class BackendUnavailable(Exception):
    """The route's container has no address to send to (not created, not running, not on the network)."""


class Backends(Protocol):
    """Where this node sends a local route's requests: the seam between routing and the container runtime."""

    async def address(self, route: Route) -> tuple[str, int]:
        """(host, port) of the route's target; raises BackendUnavailable with a reason a person can read."""
        ...

    def forget(self, route: Route) -> None:
        """The address given for `route` refused a connection: look it up afresh next time."""
        ...


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _in_networks(address: str, networks: Sequence[IPNetwork]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


class IngressProxy:
    """The proxy of one node; see the module docstring."""

    def __init__(
        self,
        table: RouteTable,
        backends: Backends,
        *,
        node: str,
        limits: IngressLimits | None = None,
        clock: Clock | None = None,
        hops: HopAuth | None = None,
    ):
        self.table = table
        self.clock: Clock = clock or SystemClock()
        self.hops = hops  # signs and verifies forwarding hops (None: no node certificates)
        self.backends = backends
        self.balancer = Balancer()  # which copy of a replicated (or handed-over) project answers
        self.node = node
        self.limits = limits or IngressLimits()
        self.port = 0  # once serving
        self._session: aiohttp.ClientSession | None = None
        limits = self.limits
        self.log = RateLimitedLog(log, self.clock)
        self.guard = ConnectionGuard(limits, exempt=self._exempt, log=self.log)
        # To another node's ingress (the session's default), and to a container of this node.
        self._remote_timeout = aiohttp.ClientTimeout(
            total=None, connect=limits.connect_timeout, sock_read=limits.idle_timeout
        )
        self._local_timeout = aiohttp.ClientTimeout(
            total=None,
            connect=limits.connect_timeout,
            sock_connect=limits.local_connect_timeout,
            sock_read=limits.idle_timeout,
        )

    def application(self) -> web.Application:
        app = web.Application(client_max_size=self.limits.max_request_body or 2**62)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    @contextlib.asynccontextmanager
    async def serving(self, host: str, port: int) -> AsyncIterator[IngressProxy]:
        """Serve on host:port (0: a free port, then in `self.port`) until the block ends."""
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=30)
        async with aiohttp.ClientSession(
            connector=connector,
            timeout=self._remote_timeout,
            auto_decompress=False,
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
            cookie_jar=aiohttp.DummyCookieJar(),
        ) as session:
            self._session = session
            runner = web.AppRunner(
                self.application(),
                access_log=None,
                handler_cancellation=True,
                keepalive_timeout=self.limits.keepalive_timeout,
                lingering_time=LINGERING,
            )
            await runner.setup()
            server: asyncio.Server | None = None
            repeats = RepeatFilter(self.clock)
            for name in QUIETED_LOGGERS:
                logging.getLogger(name).addFilter(repeats)
            try:
                sock = socket.create_server((host, port), family=_family(host), reuse_port=False, backlog=BACKLOG)
                assert runner.server is not None
                server = await asyncio.get_running_loop().create_server(
                    self.guard.factory(runner.server), sock=sock, backlog=BACKLOG
                )
                self.port = sock.getsockname()[1]
                log.info("ingress listening", address=f"{host}:{self.port}", node=self.node)
                yield self
            finally:
                if server is not None:
                    server.close()
                await runner.cleanup()
                for name in QUIETED_LOGGERS:
                    logging.getLogger(name).removeFilter(repeats)
                self._session = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Route one request (see the module docstring); once answered, the connection's next head is timed."""
        try:
            return await self._handle(request)
        finally:
            self.guard.request_done(request.transport)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        host = request.headers.get(hdrs.HOST, "")
        routes = self.table.replicas(host)
        if not routes:
            return self._page(404, "unknown-host", f'No project serves host "{host}".')
        route = routes[0]
        if not route.public and not self._internal_client(request):
            return self._page(403, "internal-only", f'Host "{route.host}" is Internal: served only inside the cluster.')
        backends = self._backends(request, routes)
        if isinstance(backends, web.Response):
            return backends
        if is_websocket(request):
            return await self._websocket(request, backends)
        return await self._balanced(request, backends)

    def _backends(self, request: web.Request, routes: Sequence[Route]) -> list[Backend] | web.Response:
        """The copies that may answer (`balance.serving`; only this node's for a request another node forwarded:
        the loop guard reads the mark whoever sent it), or the page saying why none may."""
        route = routes[0]
        backends = serving(routes, now=self.clock.now())
        if not backends:
            phase = route.phase or "Pending"
            return self._page(503, "not-running", f'Project "{route.shown}" is {phase}, not Running.')
        forwarded_by = request.headers.get(FORWARDED_BY, "")
        if not forwarded_by:
            return backends
        here = [b for b in backends if b.node == self.node]
        if here:
            return here
        return self._page(
            502,
            "misrouted",
            f'Project "{route.shown}" runs on node {backends[0].node}, not here; '
            f"node {forwarded_by} forwarded the request (not forwarded again).",
        )

    async def _balanced(self, request: web.Request, backends: Sequence[Backend]) -> web.StreamResponse:
        """Send the request to one copy after another (`balance`) until one answers or no retry is allowed."""
        limits = self.limits
        if limits.max_request_body and (request.content_length or 0) > limits.max_request_body:
            return self._page(413, "request-too-large", f"The request body is over {limits.max_request_body} bytes.")
        body = RequestBody(request.content, limits.max_request_body, limits.body_timeout)
        tried: set[tuple[str, str]] = set()
        readdressed: set[tuple[str, str]] = set()  # copies tried once more at their new address
        answer: web.StreamResponse | None = None
        for last_round in (False, True):
            backend = self.balancer.choose(backends, tried=tried)
            for _ in range(MAX_ATTEMPTS):
                if backend is None:
                    break
                with self.balancer.using(backend):
                    outcome = await self._attempt(request, backend, body)
                if not isinstance(outcome, _Retry):
                    return outcome
                answer = outcome.page
                if outcome.again and backend.key not in readdressed:
                    readdressed.add(backend.key)
                    continue
                tried.add(backend.key)
                backend = self.balancer.choose(backends, tried=tried)
            stale = answer is not None and answer.headers.get(ERROR_HEADER, "") in STALE_ROUTE_ERRORS
            rerouted = await self._rerouted(request, backends) if stale and not last_round else None
            if rerouted is None:
                break
            backends, tried = rerouted, set()
        assert answer is not None  # `backends` is never empty: one copy at least was tried
        return answer

    async def _rerouted(self, request: web.Request, backends: Sequence[Backend]) -> list[Backend] | None:
        """The copies to try again after every copy of `backends` failed before the request was sent on, the last
        with a peer's answer that its routes differ from this node's (`STALE_ROUTE_ERRORS`: a move this node has
        not heard of yet while the peer has, e.g. it no longer serves a handed-off copy): the route table's, once
        they differ from `backends` within `REROUTE_WAIT` seconds; None when they do not change."""
        host = request.headers.get(hdrs.HOST, "")
        was = {b.key for b in backends}
        deadline = self.clock.monotonic() + REROUTE_WAIT
        while self.clock.monotonic() < deadline:
            await self.clock.sleep(REROUTE_POLL)
            fresh = self._backends(request, self.table.replicas(host))
            if isinstance(fresh, list) and {b.key for b in fresh} != was:
                return fresh
        return None

    async def _attempt(self, request: web.Request, backend: Backend, body: RequestBody) -> web.StreamResponse | _Retry:
        """One try of `backend`: what goes to the client, or (`_Retry`) the page of a failure after which another
        copy may be tried (`balance.may_retry_*`: nothing of the request body was sent)."""
        try:
            target, first_hop = await self._target(request, backend)
        except _Refused as exc:
            return _Retry(self._page(exc.status, exc.error, str(exc)))
        local = backend.node == self.node
        try:
            upstream = await self._send(request, backend, target, body, first_hop=first_hop)
        except (BodyTooLarge, BodyTooSlow, aiohttp.ClientError, TimeoutError) as exc:
            page = self._failed(request, backend, exc, body.failure)
            if body.started or not may_retry_failure(exc, method=request.method):
                return page
            return _Retry(page, again=never_sent(exc) and await self._readdressed(backend, target))
        async with upstream:
            error = upstream.headers.get(ERROR_HEADER, "")
            if (
                not local
                and error
                and not body.started
                and may_retry_page(upstream.status, error, method=request.method)
            ):
                headers = end_to_end(upstream.headers, drop=(hdrs.CONTENT_LENGTH,))
                return _Retry(web.Response(status=upstream.status, headers=headers, body=await upstream.read()))
            return await self._relay(request, upstream, local=local)

    async def _readdressed(self, backend: Backend, tried: URL) -> bool:
        """Whether a copy of this node that refused a connection has another address now: its container was just
        replaced (a start-first update switched to the new one), so the same copy may be tried once more."""
        if backend.node != self.node:
            return False
        try:
            host, port = await self.backends.address(backend.route)
        except BackendUnavailable:
            return False
        return (host, port) != (tried.host, tried.port)

    async def _target(self, request: web.Request, backend: Backend) -> tuple[URL, bool]:
        """(where to send, whether this node is the first ingress) for a copy: its container's address when it runs
        here, else its node's ingress. The first-hop decision trusts nodes only."""
        route = backend.route
        if backend.node == self.node:
            try:
                host, port = await self.backends.address(route)
            except BackendUnavailable as exc:
                raise _Refused(503, "no-backend", f'Project "{route.shown}": {exc}') from exc
            return URL.build(scheme="http", host=host, port=port), not self._from_node(request)
        endpoint = self.table.node(backend.node)
        if endpoint is None or not endpoint.address or not endpoint.ingress_port:
            raise _Refused(
                502,
                "node-unreachable",
                f'Project "{route.shown}" runs on node {backend.node}, which publishes no ingress address.',
            )
        return URL.build(scheme="http", host=endpoint.address, port=endpoint.ingress_port), True

    def _from_node(self, request: web.Request) -> bool:
        """Whether `request` is a hop from another node's ingress: marked and signed with that node's certificate
        key (`hop.py`); without node certificates (nothing is authenticated), marked and from a node's address."""
        if FORWARDED_BY not in request.headers:
            return False
        if self.hops is None:
            return self.table.is_node_address(request.remote or "")
        return self._signed_hop(request)

    def _signed_hop(self, request: web.Request) -> bool:
        """Whether `request` carries a valid hop signature (verified once per request, then remembered on it)."""
        assert self.hops is not None
        verdict = request.get(_HOP_VERDICT)
        if verdict is None:
            host = request.headers.get(hdrs.HOST, "")
            signer = self.hops.verify(request.headers, method=request.method, host=host, path=request.raw_path)
            verdict = request[_HOP_VERDICT] = signer is not None
        return verdict

    def _trusted(self, request: web.Request) -> bool:
        """Whether the client's own forwarding headers are kept: another node's hop, or a trusted proxy."""
        return self._from_node(request) or _in_networks(request.remote or "", self.limits.trusted_proxies)

    def _exempt(self, address: str) -> bool:
        """Whether connections from `address` count against the global limit only: nodes and trusted proxies
        carry many clients' requests."""
        return self.table.is_node_address(address) or _in_networks(address, self.limits.trusted_proxies)

    def _internal_client(self, request: web.Request) -> bool:
        """Whether `request` may reach Internal routes: from loopback, this node's own address or a signed hop of
        another node; without node certificates, from any address a node reported."""
        address = request.remote or ""
        if _is_loopback(address):
            return True
        if self.hops is None:  # nothing is authenticated: the addresses nodes report are all there is
            return self.table.is_node_address(address)
        own = self.table.node(self.node)
        if own is not None and address in own.addresses:
            return True
        return self._signed_hop(request)

    def _page(self, status: int, error: str, text: str) -> web.Response:
        return error_page(status, error, text, node=self.node)

    def _outgoing(
        self, request: web.Request, backend: Backend, target: URL, *, first_hop: bool
    ) -> tuple[URL, CIMultiDict[str]]:
        local = backend.node == self.node
        dropped = (*HOP_HEADERS, FORWARDED_BY) if local else HOP_HEADERS
        headers = upstream_headers(request, first_hop=first_hop, trusted=self._trusted(request), drop=dropped)
        url = target.with_path(request.rel_url.raw_path, encoded=True).with_query(request.rel_url.query)
        if not local:
            headers[FORWARDED_BY] = self.node
            if self.hops is not None:  # signs the path and query exactly as sent
                host = request.headers.get(hdrs.HOST, "")
                headers.update(self.hops.sign(to=backend.node, method=request.method, host=host, path=url.raw_path_qs))
        return url, headers

    async def _send(
        self, request: web.Request, backend: Backend, target: URL, body: RequestBody, *, first_hop: bool
    ) -> aiohttp.ClientResponse:
        """The upstream response to `request` sent to `target` (the headers in; the body still to be read)."""
        assert self._session is not None
        url, headers = self._outgoing(request, backend, target, first_hop=first_hop)
        timeout = self._local_timeout if backend.node == self.node else self._remote_timeout
        async with asyncio.timeout(self.limits.response_timeout):
            return await self._session.request(
                request.method,
                url,
                headers=headers,
                data=body.chunks() if request.body_exists else None,
                allow_redirects=False,
                compress=None,
                timeout=timeout,
            )

    def _failed(self, request: web.Request, backend: Backend, exc: Exception, body: Exception | None) -> web.Response:
        """The page for an upstream request that failed with `exc`; the body's own failure (`body`) comes first,
        as aiohttp wraps it in its errors."""
        route, limits, local = backend.route, self.limits, backend.node == self.node
        if isinstance(body, BodyTooSlow):
            return self._slow_body(request)
        if isinstance(body, BodyTooLarge):
            return self._page(413, "request-too-large", f"The request body is over {limits.max_request_body} bytes.")
        if isinstance(exc, aiohttp.ConnectionTimeoutError):  # before TimeoutError, which it also is
            self.backends.forget(route)
            waited = limits.local_connect_timeout if local else limits.connect_timeout
            where = f"{route.service}:{route.port}" if local else f"the ingress of node {backend.node}"
            return self._page(
                503 if local else 502,
                "backend-unreachable",
                f'Project "{route.shown}" ({where}) did not accept a connection within {waited:g} s '
                "(stopped or restarting); try again shortly.",
            )
        if isinstance(exc, TimeoutError):
            return self._page(
                504,
                "backend-timeout",
                f'Project "{route.shown}" did not answer within {limits.response_timeout:g} s.',
            )
        self.backends.forget(route)
        return self._page(
            502,
            "backend-refused",
            f'Project "{route.shown}" ({route.service}:{route.port}) refused the connection: {exc}',
        )

    def _slow_body(self, request: web.Request) -> web.Response:
        """408 for a client that stopped sending its body; the connection is not kept."""
        self.log.info("ingress request body too slow", key="body-timeout", client=request.remote or "")
        response = self._page(
            408, "body-timeout", f"No byte of the request body came for {self.limits.body_timeout:g} s."
        )
        response.force_close()
        return response

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse, *, local: bool
    ) -> web.StreamResponse:
        """Copy the backend's response to the client as it arrives (a small one of known length in one piece). A
        container's own `X-Caravanserai-Error` is dropped: only an ingress says why it reached no container."""
        dropped = (hdrs.CONTENT_LENGTH, ERROR_HEADER) if local else (hdrs.CONTENT_LENGTH,)
        headers = end_to_end(upstream.headers, drop=dropped)
        length = upstream.content_length if hdrs.CONTENT_LENGTH in upstream.headers else None
        limit = self.limits.max_response_body
        bodiless = request.method == "HEAD" or upstream.status in (204, 304) or upstream.status < 200
        if length is not None and length <= SMALL_BODY and (not limit or length <= limit) and not bodiless:
            try:
                body = await upstream.content.readexactly(length) if length else b""
            except (aiohttp.ClientError, asyncio.IncompleteReadError, TimeoutError) as exc:
                self.log.info("ingress backend response ended early", key="early-end", error=str(exc))
                if request.transport is not None:
                    request.transport.close()
                return web.Response(status=502)
            return web.Response(status=upstream.status, reason=upstream.reason, headers=headers, body=body)
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        response.headers.extend(headers)
        if upstream.content_length is not None and hdrs.CONTENT_LENGTH in upstream.headers:
            response.content_length = upstream.content_length
        await response.prepare(request)
        limit, sent = self.limits.max_response_body, 0
        try:
            async for chunk in upstream.content.iter_any():
                sent += len(chunk)
                if limit and sent > limit:
                    self.log.warning("ingress response cut off at the size limit", key="cut-off", limit=limit)
                    if request.transport is not None:
                        request.transport.close()
                    return response
                await response.write(chunk)
        except (aiohttp.ClientError, TimeoutError) as exc:  # the backend broke off: so does the client connection
            self.log.info("ingress backend stream ended early", key="early-end", error=str(exc))
            if request.transport is not None:
                request.transport.close()
            return response
        await response.write_eof()
        return response

    async def _websocket(self, request: web.Request, backends: Sequence[Backend]) -> web.StreamResponse:
        """Proxy a WebSocket to one copy (chosen like any request; not retried once chosen), message by message."""
        assert self._session is not None
        backend = self.balancer.choose(backends, tried=set())
        assert backend is not None  # `backends` is never empty
        route = backend.route
        try:
            target, first_hop = await self._target(request, backend)
        except _Refused as exc:
            return self._page(exc.status, exc.error, str(exc))
        url, headers = self._outgoing(request, backend, target, first_hop=first_hop)
        for name in list(headers):
            if name.lower() in WEBSOCKET_HANDSHAKE:
                del headers[name]
        protocols = [p.strip() for p in request.headers.get(hdrs.SEC_WEBSOCKET_PROTOCOL, "").split(",") if p.strip()]
        with self.balancer.using(backend):
            try:
                upstream = await self._session.ws_connect(
                    url.with_scheme("ws"),
                    headers=headers,
                    protocols=protocols,
                    autoping=False,
                    max_msg_size=self.limits.max_websocket_message,
                    timeout=aiohttp.ClientWSTimeout(ws_receive=None),
                )
            except (aiohttp.ClientError, TimeoutError) as exc:
                return self._page(502, "backend-refused", f'Project "{route.shown}" refused the WebSocket: {exc}')
            async with upstream:
                client = web.WebSocketResponse(
                    protocols=(upstream.protocol,) if upstream.protocol else (),
                    autoping=False,
                    max_msg_size=self.limits.max_websocket_message,
                )
                await client.prepare(request)
                await pump_websockets(client, upstream)
                return client


@dataclass(frozen=True, slots=True)
class _Retry:
    """A failed try after which the request may go to another copy (`again`: to the same one, readdressed)."""

    page: web.Response
    again: bool = False


class _Refused(Exception):
    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error


__all__ = ["BackendUnavailable", "Backends", "IngressProxy"]
