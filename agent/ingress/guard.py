"""The ingress's connection layer, in front of aiohttp's HTTP protocol: connection limits and the header timeout.

    guard = ConnectionGuard(IngressLimits(), exempt=table.is_node_address, log=RateLimitedLog(log, clock))
    server = await loop.create_server(guard.factory(runner.server), sock=sock)
    ...
    guard.request_done(request.transport)    # the proxy, when it has answered a request

Guarantees:

* **Connection limits.** At most `max_connections` connections are open at once, and at most
  `max_connections_per_client` from one client address (addresses `exempt` says so, another node's ingress or a
  trusted proxy, count only against the global limit). A connection over a limit is answered at once with a
  bare `503` (`Connection: close`) and closed: it never reaches aiohttp, holds no buffer and costs one log line
  per `RateLimitedLog` interval, not one per connection.
* **Header timeout.** From the first byte of a request's head, the whole head (up to the blank line) must arrive
  within `header_timeout` seconds, or the connection is closed (a slowloris that trickles header bytes holds a
  connection that long at most). The next request's head is timed once the proxy has answered the previous one
  (`request_done`); bytes sent meanwhile (a body, WebSocket frames) are never timed here. An idle connection
  (no byte of a next request) is aiohttp's `keepalive_timeout`, which also bounds a connection that sends
  nothing at all.
* **Files to spare.** The global limit is lowered, with a warning, to the process's file limit less
  `FD_RESERVE`, so the agent's own files (Docker, the API, `/healthz`) never run out because of clients.
* Counts are exact: every admitted connection is counted out when its transport is lost, whoever closes it.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections import Counter
from collections.abc import Callable
from typing import Any

from caravanserai.agent.ingress.httpdetails import IngressLimits
from caravanserai.clock import Clock

HEAD_END = b"\r\n\r\n"
MAX_SLOTS = 1024
FD_RESERVE = 512  # files kept for the agent itself below RLIMIT_NOFILE


def open_files_limit() -> int:
    """The process's soft limit of open files (a very large number when unlimited)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 2**31


def bounded_connections(wanted: int, files: int) -> int:
    """`wanted` connections, or fewer when the file limit `files` leaves less room than that above FD_RESERVE."""
    return max(1, min(wanted, files - FD_RESERVE))


REFUSAL = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"


class RateLimitedLog:
    """Log lines that may repeat per connection or per request, at most once per `interval` seconds for each event
    (and key); the next line that gets through carries `suppressed=N`, the count of the lines left out."""

    def __init__(self, logger: Any, clock: Clock, *, interval: float = 10.0) -> None:
        self._log = logger
        self._clock = clock
        self._interval = interval
        self._next: dict[tuple[str, str], float] = {}
        self._suppressed: Counter[tuple[str, str]] = Counter()

    def warning(self, event: str, *, key: str = "", **fields: Any) -> None:
        self._emit("warning", event, key, fields)

    def info(self, event: str, *, key: str = "", **fields: Any) -> None:
        self._emit("info", event, key, fields)

    def _emit(self, level: str, event: str, key: str, fields: dict[str, Any]) -> None:
        now, slot = self._clock.monotonic(), (event, key)
        if now < self._next.get(slot, 0.0):
            self._suppressed[slot] += 1
            return
        self._next[slot] = now + self._interval
        suppressed = self._suppressed.pop(slot, 0)
        extra = {"suppressed": suppressed} if suppressed else {}
        getattr(self._log, level)(event, **fields, **extra)


class RepeatFilter(logging.Filter):
    """A `logging` filter with the rule of `RateLimitedLog` for the standard library's loggers (asyncio's accept
    errors, aiohttp's server): one record per message template per `interval`, then a count of those left out."""

    def __init__(self, clock: Clock, *, interval: float = 10.0) -> None:
        super().__init__()
        self._clock = clock
        self._interval = interval
        self._next: dict[tuple[str, object], float] = {}
        self._suppressed: Counter[tuple[str, object]] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        now, slot = self._clock.monotonic(), (record.name, record.msg)
        if now < self._next.get(slot, 0.0):
            self._suppressed[slot] += 1
            return False
        if len(self._next) >= MAX_SLOTS:  # messages that vary without end: forget, rather than grow
            self._next.clear()
            self._suppressed.clear()
        self._next[slot] = now + self._interval
        suppressed = self._suppressed.pop(slot, 0)
        if suppressed:
            record.msg = f"{record.msg} ({suppressed} similar lines suppressed)"
        return True


class ConnectionGuard:
    """Counts the open connections of one listener and wraps its protocol factory (see the module docstring)."""

    def __init__(
        self,
        limits: IngressLimits,
        *,
        exempt: Callable[[str], bool] = lambda _address: False,
        log: RateLimitedLog,
        files: int | None = None,
    ) -> None:
        self.limits = limits
        files = open_files_limit() if files is None else files
        self.max_connections = bounded_connections(limits.max_connections, files)
        if self.max_connections < limits.max_connections:
            log.warning(
                "ingress connection limit lowered to fit the open-files limit",
                key="fd-limit",
                max_connections=self.max_connections,
                asked=limits.max_connections,
                open_files_limit=files,
            )
        self._exempt = exempt
        self.log = log
        self.open = 0
        self.refused = 0
        self._per_client: Counter[str] = Counter()
        self._by_transport: dict[asyncio.BaseTransport, _Guarded] = {}

    def factory(self, inner: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        """A protocol factory for `loop.create_server`: each connection is admitted (or refused) here, and an
        admitted one is served by a protocol of `inner` (aiohttp's server)."""
        return lambda: _Guarded(self, inner)

    def request_done(self, transport: asyncio.BaseTransport | None) -> None:
        """The proxy answered a request on `transport`: the next bytes start a new head (and its timeout)."""
        guarded = self._by_transport.get(transport) if transport is not None else None
        if guarded is not None:
            guarded.await_head()

    def track(self, transport: asyncio.BaseTransport, guarded: _Guarded) -> None:
        self._by_transport[transport] = guarded

    def untrack(self, transport: asyncio.BaseTransport) -> None:
        self._by_transport.pop(transport, None)

    def clients(self, address: str) -> int:
        """The open connections from `address`."""
        return self._per_client[address]

    def admit(self, address: str) -> str:
        """ "" when a connection from `address` may open (and it is counted), else the limit it would break."""
        if self.open >= self.max_connections:
            return "max-connections"
        per_client = self.limits.max_connections_per_client
        if per_client and self._per_client[address] >= per_client and not self._exempt(address):
            return "max-connections-per-client"
        self.open += 1
        self._per_client[address] += 1
        return ""

    def refuse(self, address: str, limit: str) -> None:
        self.refused += 1
        self.log.warning(
            "ingress connection refused",
            key=limit,
            limit=limit,
            client=address,
            open=self.open,
            refused_total=self.refused,
        )

    def release(self, address: str) -> None:
        self.open -= 1
        self._per_client[address] -= 1
        if self._per_client[address] <= 0:
            del self._per_client[address]


class _Guarded(asyncio.Protocol):
    """One connection: admitted or refused at `connection_made`; an admitted one forwards every event to its
    aiohttp protocol and times request heads."""

    def __init__(self, guard: ConnectionGuard, inner: Callable[[], asyncio.Protocol]) -> None:
        self._guard = guard
        self._inner_factory = inner
        self._inner: asyncio.Protocol | None = None
        self._transport: asyncio.Transport | None = None
        self._address = ""
        self._in_head = False  # a head has begun and not ended
        self._awaiting_head = True  # the next bytes begin a head
        self._tail = b""  # the head's last bytes, to find HEAD_END across reads
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        peer = transport.get_extra_info("peername")
        self._address = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        refused = self._guard.admit(self._address)
        if refused:
            self._guard.refuse(self._address, refused)
            transport.write(REFUSAL)
            transport.close()
            return
        self._transport = transport
        self._guard.track(transport, self)
        self._inner = self._inner_factory()
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._inner is None:
            return
        self._cancel_timer()
        if self._transport is not None:
            self._guard.untrack(self._transport)
        self._guard.release(self._address)
        inner, self._inner = self._inner, None
        inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._inner is None:
            return  # refused: whatever it sends is dropped
        if self._awaiting_head or self._in_head:
            self._watch_head(data)
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    def await_head(self) -> None:
        """The previous request is answered: time the next head from its first byte."""
        self._cancel_timer()
        self._in_head, self._awaiting_head, self._tail = False, True, b""

    def _watch_head(self, data: bytes) -> None:
        if self._awaiting_head:
            self._awaiting_head, self._in_head = False, True
            timeout = self._guard.limits.header_timeout
            self._timer = asyncio.get_running_loop().call_later(timeout, self._head_too_slow)
        seen = self._tail + data
        if HEAD_END in seen:
            self._in_head = False
            self._cancel_timer()
        else:
            self._tail = seen[-(len(HEAD_END) - 1) :]

    def _head_too_slow(self) -> None:
        self._timer = None
        if self._in_head and self._transport is not None:
            self._guard.log.info(
                "ingress request head too slow: connection closed",
                key="header-timeout",
                client=self._address,
                header_timeout=self._guard.limits.header_timeout,
            )
            self._transport.abort()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


__all__ = ["FD_RESERVE", "ConnectionGuard", "bounded_connections", "open_files_limit", "RateLimitedLog", "RepeatFilter"]
