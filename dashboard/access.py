"""Who may use the dashboard: its own `Host` names only, and the per-start access token (as Jupyter does).

Guarantees (the `access` middleware, outermost, on every route: the page, static files, reads, streams, writes and
the health endpoints):

* **Host.** A request whose `Host` header is not one of the dashboard's own names is refused with 403 before
  anything else: the listen address, `localhost`, `127.0.0.1` and `[::1]`, each with the port the dashboard
  serves on, plus `--allowed-hosts` (a name alone allows it on any port, `name:port` on that port). So a page
  that rebinds its own DNS name to the dashboard's address (DNS rebinding) reaches nothing, reads included.
* **Token.** Every request carries the access token, in one of three ways: `?token=…` in the URL (the link
  `cara up` and the dashboard's start line print), the cookie that such a visit sets (HttpOnly, SameSite=Strict,
  Path=/, named after the port), or `Authorization: Token …` (or `Bearer …`) for scripts. Tokens are compared in
  constant time. Without it a browser gets a 401 page saying how to get in, anything else a 401 JSON error.
* The token is made per start (`new_token`, 256 bits) unless `--access-token-file` names a file holding one
  (`cara up` writes a fresh one per cluster start, so a restarted dashboard keeps its printed URL).
"""

from __future__ import annotations

import hmac
import html
import os
import secrets
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from caravanserai.text.addresses import Address

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LOCAL_NAMES = ("localhost", "127.0.0.1", "[::1]")
TOKEN_QUERY = "token"
TOKEN_SCHEMES = ("token", "bearer")


def new_token() -> str:
    """A fresh access token (256 random bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def read_or_make_token(path: Path) -> str:
    """The token held in `path`; a new one written there (mode 0600) when the file is missing or empty."""
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        token = ""
    if token:
        return token
    return write_token(path, new_token())


def write_token(path: Path, token: str) -> str:
    """Write `token` to `path`, readable by its owner only (0600 from creation on); returns the token."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def parse_allowed_hosts(text: str) -> tuple[str, ...]:
    """`--allowed-hosts a.example,b.example:8443` as lower-case names; ValueError naming the flag for an empty or
    malformed entry."""
    entries = tuple(part.strip().lower() for part in text.split(",")) if text.strip() else ()
    for entry in entries:
        if not entry or any(c in entry for c in "/ @?#"):
            raise ValueError(f"--allowed-hosts: {entry!r} is not a host name or host:port")
    return entries


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


@dataclass
class Access:
    """The token and the Host names the dashboard answers to. `port` is set once it listens (listen port 0)."""

    token: str
    listen: Address
    allowed_hosts: tuple[str, ...] = ()
    port: int = 0
    _hosts: frozenset[str] = field(default=frozenset(), init=False)

    def serving_on(self, port: int) -> None:
        """The port the dashboard listens on: the Host names with that port become valid."""
        self.port = port
        names: Iterable[str] = {_bracketed(self.listen.host.lower()), *LOCAL_NAMES}
        self._hosts = frozenset({f"{name}:{port}" for name in names} | set(self.allowed_hosts))

    @property
    def cookie(self) -> str:
        """The cookie's name: one per port, as cookies are shared by every port of a host."""
        return f"cara-dashboard-{self.port}"

    def host_allowed(self, host: str) -> bool:
        """Whether `host` (a Host header) names this dashboard."""
        host = host.strip().lower()
        if host in self._hosts:
            return True
        name, sep, port = host.rpartition(":")
        return bool(sep) and port.isdigit() and not name.endswith(":") and name in self.allowed_hosts

    def _matches(self, given: str | None) -> bool:
        if not given:
            return False
        return hmac.compare_digest(given.encode(), self.token.encode())

    def _from_header(self, request: web.Request) -> str | None:
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        return value.strip() if scheme.lower() in TOKEN_SCHEMES else None

    def url(self, scheme: str, host: str) -> str:
        """The page's URL with the token, as printed at start (a wildcard listen address shows as loopback)."""
        host = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
        return f"{scheme}://{_bracketed(host)}:{self.port}/?{TOKEN_QUERY}={self.token}"

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """The rules of the module docstring, before any other middleware or handler."""
        host = request.headers.get("Host", "")
        if not self.host_allowed(host):
            return _refusal(
                request,
                403,
                f"refused: {host or 'a request without Host'} is not this dashboard's address "
                "(use localhost or the listen address; tunnels and proxies: --allowed-hosts)",
            )
        from_query = request.query.get(TOKEN_QUERY)
        if self._matches(from_query):
            response = await handler(request)
            if not response.prepared:
                response.set_cookie(
                    self.cookie, self.token, httponly=True, samesite="Strict", path="/", secure=request.secure
                )
            return response
        if self._matches(self._from_header(request)) or self._matches(request.cookies.get(self.cookie)):
            return await handler(request)
        return _refusal(
            request,
            401,
            "this dashboard needs its access token: open the URL with ?token=… that "
            "`cara up` (or the dashboard's start line) printed, or send Authorization: Token …",
        )


def _wants_page(request: web.Request) -> bool:
    return request.method == "GET" and "text/html" in request.headers.get("Accept", "")


def _refusal(request: web.Request, status: int, message: str) -> web.Response:
    if _wants_page(request):
        page = (
            "<!doctype html><meta charset=utf-8><title>Caravanserai dashboard</title>"
            f"<h1>Caravanserai dashboard</h1><p>{html.escape(message)}</p>"
            "<p>The URL is printed by <code>cara up</code> and in the dashboard's log line "
            "<code>dashboard serving</code>; with <code>cara up</code> the token is also in the file "
            "<code>dashboard-token</code> of its data directory.</p>"
        )
        return web.Response(status=status, text=page, content_type="text/html")
    return web.json_response({"error": message}, status=status)


__all__ = ["Access", "new_token", "parse_allowed_hosts", "read_or_make_token", "write_token"]
