"""The ingress reverse proxy (aiohttp server and client): any node answers for any host.

    proxy = IngressProxy(table, backends, node="node-1", limits=IngressLimits())
    async with proxy.serving("0.0.0.0", 8081):
        ...

Guarantees for a request with `Host: H`:

* H unknown → **404** naming H. H's route is `Internal` and the client is not inside → **403**. Inside means: on
  loopback or on this node's own address (a process of this machine), or a hop another node's agent signed with
  its node certificate (`ingress.hop`), never an address a node reported. Without node certificates (`hops`
  None: nothing in the cluster is authenticated) any node's reported address counts, as before. H's project is
  not Running → **503** naming the project and its phase.
* The project runs on this node → the request goes to the target service's container on the project network
  (`backends` says where); a refused or unresolvable backend → **502**/**503**; a container that does not accept
  the connection within `local_connect_timeout` (0.5 s: on the node's own bridge, silence means it is stopped or
  restarting) → **503** at once, naming the service, instead of a request hanging; no headers from it in time →
  **504**.
* The project runs on another node → the request is forwarded once, to that node's ingress over its published
  address, marked with `X-Caravanserai-Forwarded-By`. A marked request is never forwarded again (**502** when
  its project does not run here either): loops are impossible. The mark counts as a hop from another node only
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
from typing import Protocol

import aiohttp
import structlog
from aiohttp import hdrs, web
from multidict import CIMultiDict
from yarl import URL

from caravanserai.agent.ingress.guard import ConnectionGuard, RateLimitedLog, RepeatFilter
from caravanserai.agent.ingress.hop import HOP_HEADERS, HopAuth
from caravanserai.agent.ingress.httpdetails import (
    FORWARDED_BY,
    WEBSOCKET_HANDSHAKE,
    IngressLimits,
    IPNetwork,
    end_to_end,
    error_page,
    is_websocket,
    upstream_headers,
)
from caravanserai.agent.ingress.routes import Route, RouteTable
from caravanserai.clock import Clock, SystemClock

log = structlog.get_logger(__name__)

BACKLOG = 1024
LINGERING = 2.0  # seconds to read and drop an unread request body after answering early (aiohttp's default: 10)
QUIETED_LOGGERS = ("asyncio", "aiohttp.server", "aiohttp.web")  # their repeated lines are rate-limited (`guard`)

CHUNK = 64 * 1024
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


class _BodyTooLarge(Exception):
    pass


class _BodyTooSlow(Exception):
    pass


class _RequestBody:
    """The request body as it comes, for the upstream request. `failure` says why it stopped early: over `limit`
    bytes (_BodyTooLarge) or no byte for `timeout` seconds (_BodyTooSlow); aiohttp wraps what the body raises in
    its own errors, so the proxy reads the reason here."""

    def __init__(self, content: aiohttp.StreamReader, limit: int, timeout: float) -> None:
        self._content = content
        self._limit = limit
        self._timeout = timeout
        self.failure: Exception | None = None

    async def chunks(self) -> AsyncIterator[bytes]:
        seen = 0
        while True:
            try:
                async with asyncio.timeout(self._timeout):
                    chunk = await self._content.read(CHUNK)
            except TimeoutError:
                self.failure = _BodyTooSlow()
                raise self.failure from None
            if not chunk:
                return
            seen += len(chunk)
            if self._limit and seen > self._limit:
                self.failure = _BodyTooLarge()
                raise self.failure
            yield chunk


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
        route = self.table.lookup(host)
        if route is None:
            return self._page(404, "unknown-host", f'No project serves host "{host}".')
        if not route.public and not self._internal_client(request):
            return self._page(403, "internal-only", f'Host "{route.host}" is Internal: served only inside the cluster.')
        if not route.running:
            phase = route.phase or "Pending"
            return self._page(503, "not-running", f'Project "{route.project}" is {phase}, not Running.')
        try:
            target, first_hop = await self._target(request, route)
        except BackendUnavailable as exc:
            return self._page(503, "no-backend", f'Project "{route.project}": {exc}')
        except _Refused as exc:
            return self._page(502, exc.error, str(exc))
        if is_websocket(request):
            return await self._websocket(request, route, target, first_hop=first_hop)
        return await self._http(request, route, target, first_hop=first_hop)

    async def _target(self, request: web.Request, route: Route) -> tuple[URL, bool]:
        """(where to send, whether this node is the first ingress) for a Running route. The loop guard reads the
        mark whoever sent it (a client that sends it is not forwarded); the first-hop decision trusts nodes only."""
        forwarded_by = request.headers.get(FORWARDED_BY, "")
        if route.node == self.node:
            host, port = await self.backends.address(route)
            return URL.build(scheme="http", host=host, port=port), not self._from_node(request)
        if forwarded_by:
            raise _Refused(
                "misrouted",
                f'Project "{route.project}" runs on node {route.node}, not here; '
                f"node {forwarded_by} forwarded the request (not forwarded again).",
            )
        endpoint = self.table.node(route.node)
        if endpoint is None or not endpoint.address or not endpoint.ingress_port:
            raise _Refused(
                "node-unreachable",
                f'Project "{route.project}" runs on node {route.node}, which publishes no ingress address.',
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
        self, request: web.Request, route: Route, target: URL, *, first_hop: bool
    ) -> tuple[URL, CIMultiDict[str]]:
        local = route.node == self.node
        dropped = (*HOP_HEADERS, FORWARDED_BY) if local else HOP_HEADERS
        headers = upstream_headers(request, first_hop=first_hop, trusted=self._trusted(request), drop=dropped)
        url = target.with_path(request.rel_url.raw_path, encoded=True).with_query(request.rel_url.query)
        if not local:
            headers[FORWARDED_BY] = self.node
            if self.hops is not None:  # signs the path and query exactly as sent
                host = request.headers.get(hdrs.HOST, "")
                headers.update(self.hops.sign(to=route.node, method=request.method, host=host, path=url.raw_path_qs))
        return url, headers

    async def _http(self, request: web.Request, route: Route, target: URL, *, first_hop: bool) -> web.StreamResponse:
        assert self._session is not None
        limits = self.limits
        if limits.max_request_body and (request.content_length or 0) > limits.max_request_body:
            return self._page(413, "request-too-large", f"The request body is over {limits.max_request_body} bytes.")
        url, headers = self._outgoing(request, route, target, first_hop=first_hop)
        body = _RequestBody(request.content, limits.max_request_body, limits.body_timeout)
        timeout = self._local_timeout if route.node == self.node else self._remote_timeout
        try:
            async with asyncio.timeout(limits.response_timeout):
                upstream = await self._session.request(
                    request.method,
                    url,
                    headers=headers,
                    data=body.chunks() if request.body_exists else None,
                    allow_redirects=False,
                    compress=None,
                    timeout=timeout,
                )
        except (_BodyTooLarge, _BodyTooSlow, aiohttp.ClientError, TimeoutError) as exc:
            return self._failed(request, route, exc, body.failure)
        async with upstream:
            return await self._relay(request, upstream)

    def _failed(self, request: web.Request, route: Route, exc: Exception, body: Exception | None) -> web.Response:
        """The page for an upstream request that failed with `exc`; the body's own failure (`body`) comes first,
        as aiohttp wraps it in its errors."""
        limits, local = self.limits, route.node == self.node
        if isinstance(body, _BodyTooSlow):
            return self._slow_body(request)
        if isinstance(body, _BodyTooLarge):
            return self._page(413, "request-too-large", f"The request body is over {limits.max_request_body} bytes.")
        if isinstance(exc, aiohttp.ConnectionTimeoutError):  # before TimeoutError, which it also is
            self.backends.forget(route)
            waited = limits.local_connect_timeout if local else limits.connect_timeout
            where = f"{route.service}:{route.port}" if local else f"the ingress of node {route.node}"
            return self._page(
                503 if local else 502,
                "backend-unreachable",
                f'Project "{route.project}" ({where}) did not accept a connection within {waited:g} s '
                "(stopped or restarting); try again shortly.",
            )
        if isinstance(exc, TimeoutError):
            return self._page(
                504,
                "backend-timeout",
                f'Project "{route.project}" did not answer within {limits.response_timeout:g} s.',
            )
        self.backends.forget(route)
        return self._page(
            502,
            "backend-refused",
            f'Project "{route.project}" ({route.service}:{route.port}) refused the connection: {exc}',
        )

    def _slow_body(self, request: web.Request) -> web.Response:
        """408 for a client that stopped sending its body; the connection is not kept."""
        self.log.info("ingress request body too slow", key="body-timeout", client=request.remote or "")
        response = self._page(
            408, "body-timeout", f"No byte of the request body came for {self.limits.body_timeout:g} s."
        )
        response.force_close()
        return response

    async def _relay(self, request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
        """Copy the backend's response to the client as it arrives (a small one of known length in one piece)."""
        headers = end_to_end(upstream.headers, drop=(hdrs.CONTENT_LENGTH,))
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

    async def _websocket(
        self, request: web.Request, route: Route, target: URL, *, first_hop: bool
    ) -> web.StreamResponse:
        assert self._session is not None
        url, headers = self._outgoing(request, route, target, first_hop=first_hop)
        for name in list(headers):
            if name.lower() in WEBSOCKET_HANDSHAKE:
                del headers[name]
        protocols = [p.strip() for p in request.headers.get(hdrs.SEC_WEBSOCKET_PROTOCOL, "").split(",") if p.strip()]
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
            return self._page(502, "backend-refused", f'Project "{route.project}" refused the WebSocket: {exc}')
        async with upstream:
            client = web.WebSocketResponse(
                protocols=(upstream.protocol,) if upstream.protocol else (),
                autoping=False,
                max_msg_size=self.limits.max_websocket_message,
            )
            await client.prepare(request)
            await _pump_websockets(client, upstream)
            return client


async def _copy(
    source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
) -> None:
    """Copy messages from `source` to `sink` until `source` closes; then close `sink` with the same code."""
    async for message in source:
        if message.type == aiohttp.WSMsgType.TEXT:
            await sink.send_str(message.data)
        elif message.type == aiohttp.WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        elif message.type == aiohttp.WSMsgType.PING:
            await sink.ping(message.data)
        elif message.type == aiohttp.WSMsgType.PONG:
            await sink.pong(message.data)
    await sink.close(code=source.close_code or aiohttp.WSCloseCode.OK)


async def _pump_websockets(client: web.WebSocketResponse, upstream: aiohttp.ClientWebSocketResponse) -> None:
    """Both directions at once; when either side closes, the other is closed too."""
    tasks = [asyncio.create_task(_copy(client, upstream)), asyncio.create_task(_copy(upstream, client))]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.close()
        await upstream.close()


class _Refused(Exception):
    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error


__all__ = ["BackendUnavailable", "Backends", "IngressProxy"]
