"""HTTP details of the ingress proxy that need no network: hop-by-hop headers, X-Forwarded-*, error pages, limits.

* **Hop-by-hop headers** (RFC 9110 §7.6.1: Connection and every header it names, Keep-Alive, Proxy-*, TE,
  Trailer, Transfer-Encoding, Upgrade) never cross the proxy, in either direction.
* **Forwarding headers are ours.** From an outside client, `X-Forwarded-*`, `Forwarded` and the hop header
  `X-Caravanserai-Forwarded-By` are dropped (a client cannot claim another address, host or scheme, nor pose as a
  node); they are kept from a configured trusted proxy (`--trusted-proxies`) and from another node's ingress.
  **X-Forwarded-For** then gets the peer's address appended; **X-Forwarded-Host** and **X-Forwarded-Proto** get
  the original Host and scheme appended, by the first ingress only (a node forwarding to another node passes them
  on unchanged, so the backend sees one logical proxy). The `Host` header itself is kept.
* **Error pages** are small HTML documents whose status code, `X-Caravanserai-Error` header (a stable reason
  word) and text say what went wrong; they name the host or the project and its phase.
"""

from __future__ import annotations

import html
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from aiohttp import hdrs, web
from multidict import CIMultiDict, CIMultiDictProxy

FORWARDED_BY = "X-Caravanserai-Forwarded-By"  # the loop guard: set by a node that forwards to another node
ERROR_HEADER = "X-Caravanserai-Error"
HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "Proxy-Connection",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
    )
)
WEBSOCKET_HANDSHAKE = frozenset(
    h.lower()
    for h in ("Sec-WebSocket-Key", "Sec-WebSocket-Version", "Sec-WebSocket-Extensions", "Sec-WebSocket-Protocol")
)
MIB = 1024 * 1024
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class IngressLimits:
    """Limits of the proxy (the `--ingress-*` flags). Sizes in bytes (0: unlimited), times in seconds."""

    max_request_body: int = 64 * MIB
    max_response_body: int = 0
    connect_timeout: float = 5.0  # to another node's ingress
    local_connect_timeout: float = 0.5  # to a container of this node (on its bridge: no answer means it is down)
    response_timeout: float = 60.0  # until the backend's response headers
    idle_timeout: float = 300.0  # no byte in either direction
    max_websocket_message: int = 4 * MIB
    # The client side (`guard`): slow or idle clients and how many connections they may hold.
    header_timeout: float = 10.0  # from a request head's first byte to its end
    body_timeout: float = 60.0  # no byte of a request body being read
    keepalive_timeout: float = 30.0  # an idle client connection (also a new one that sends nothing)
    max_connections: int = 4096  # open client connections at once
    max_connections_per_client: int = 256  # from one client address (nodes and trusted proxies: global only)
    trusted_proxies: tuple[IPNetwork, ...] = ()  # whose X-Forwarded-*/Forwarded are kept (`--trusted-proxies`)


def connection_tokens(headers: CIMultiDictProxy[str] | CIMultiDict[str]) -> set[str]:
    """Header names listed in the Connection header(s), lower case."""
    return {t.strip().lower() for value in headers.getall(hdrs.CONNECTION, ()) for t in value.split(",") if t.strip()}


def end_to_end(headers: CIMultiDictProxy[str] | CIMultiDict[str], *, drop: Iterable[str] = ()) -> CIMultiDict[str]:
    """A copy of `headers` without hop-by-hop headers (and without the names in `drop`)."""
    skip = HOP_BY_HOP | connection_tokens(headers) | {d.lower() for d in drop}
    return CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in skip)


def _append(headers: CIMultiDict[str], name: str, value: str) -> None:
    previous = ", ".join(headers.getall(name, ()))
    headers.popall(name, None)
    headers[name] = f"{previous}, {value}" if previous else value


def is_forwarding_header(name: str) -> bool:
    """Whether `name` is one a proxy sets: X-Forwarded-*, Forwarded, or our hop header."""
    lower = name.lower()
    return lower.startswith("x-forwarded-") or lower in ("forwarded", FORWARDED_BY.lower())


def upstream_headers(
    request: web.BaseRequest, *, first_hop: bool, trusted: bool, drop: Iterable[str] = ()
) -> CIMultiDict[str]:
    """The headers to send to the next hop for `request` (see the module docstring); the client's own forwarding
    headers only when it is `trusted` (a trusted proxy or another node's ingress)."""
    headers = end_to_end(request.headers, drop=drop)
    if not trusted:
        for name in [k for k in headers if is_forwarding_header(k)]:
            headers.popall(name, None)
    _append(headers, "X-Forwarded-For", request.remote or "")
    if first_hop:
        _append(headers, "X-Forwarded-Host", request.headers.get(hdrs.HOST, ""))
        _append(headers, "X-Forwarded-Proto", request.scheme)
    return headers


def is_websocket(request: web.BaseRequest) -> bool:
    """True for a WebSocket upgrade request."""
    upgrade = request.headers.get(hdrs.UPGRADE, "").lower()
    return upgrade == "websocket" and "upgrade" in connection_tokens(request.headers)


_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{status} {reason}</title></head>
<body><h1>{status} {reason}</h1><p>{text}</p><hr><p>Caravanserai ingress on node {node}</p></body></html>
"""


def error_page(status: int, error: str, text: str, *, node: str) -> web.Response:
    """An error page: `status`, a stable `error` word in `X-Caravanserai-Error`, and `text` for a person."""
    reason = _REASONS.get(status, "Error")
    body = _PAGE.format(status=status, reason=reason, text=html.escape(text, quote=False), node=html.escape(node))
    response = web.Response(status=status, text=body, content_type="text/html")
    response.headers[ERROR_HEADER] = error
    return response


_REASONS = {
    403: "Forbidden",
    408: "Request Timeout",
    404: "Not Found",
    413: "Content Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}

__all__ = [
    "ERROR_HEADER",
    "FORWARDED_BY",
    "HOP_BY_HOP",
    "IPNetwork",
    "IngressLimits",
    "WEBSOCKET_HANDSHAKE",
    "connection_tokens",
    "end_to_end",
    "error_page",
    "is_forwarding_header",
    "is_websocket",
    "upstream_headers",
]
