"""gRPC channels to the members of one etcd cluster, with failover between them.

- One channel per endpoint, created on first use and kept until `close()`; gRPC itself reconnects a broken
  channel with exponential backoff (200 ms doubling to 2 s).
- Calls go to the *current* endpoint. A call that fails with UNAVAILABLE or DEADLINE_EXCEEDED reports it with
  `failed(conn)` and the next endpoint becomes current (round robin); concurrent reports about the same
  endpoint move on only once.
- HTTP/2 keepalive pings on open streams detect a dead member within about 40 s even when a watch is idle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import grpc
import structlog

from caravanserai.api.etcd import rpc_pb2_grpc
from caravanserai.errors import Unavailable
from caravanserai.process.tls import TLSFiles
from caravanserai.storage.etcd_errors import STREAM_RETRY_CODES, etcd_error, fails_over

if TYPE_CHECKING:
    from caravanserai.api.etcd.rpc_pb2_grpc import (
        KVAsyncStub,
        LeaseAsyncStub,
        MaintenanceAsyncStub,
        WatchAsyncStub,
    )

log = structlog.get_logger(__name__)

MAX_MESSAGE_BYTES = 128 * 1024 * 1024
CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
    # Ping open streams every 30 s (etcd refuses pings more often than every 5 s) and drop the
    # connection when a ping goes unanswered for 10 s. Pings continue on a stream without data.
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 0),
    # Large lists: etcd answers a Range with everything under a prefix in one message.
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
)


def parse_endpoint(endpoint: str) -> tuple[str, bool]:
    """The gRPC target (`host:port`) of an endpoint URL and whether it uses TLS.

    `http://host:port` and a bare `host:port` are plaintext; `https://host:port` uses TLS (the system's root
    certificates unless a CA is given, and a client certificate when one is given).
    """
    if "://" not in endpoint:
        return endpoint, False
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"unsupported etcd endpoint {endpoint!r}: use http://host:port or https://host:port")
    return parts.netloc, parts.scheme == "https"


class Connection:
    """One channel to one etcd member and the stubs bound to it."""

    def __init__(self, endpoint: str, *, tls: TLSFiles | None = None) -> None:
        target, secure = parse_endpoint(endpoint)
        self.endpoint = endpoint
        if secure:
            creds = tls.channel_credentials() if tls is not None else grpc.ssl_channel_credentials()
            self.channel = grpc.aio.secure_channel(target, creds, options=CHANNEL_OPTIONS)
        else:
            self.channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        self.kv: KVAsyncStub = rpc_pb2_grpc.KVStub(self.channel)
        self.watch: WatchAsyncStub = rpc_pb2_grpc.WatchStub(self.channel)
        self.lease: LeaseAsyncStub = rpc_pb2_grpc.LeaseStub(self.channel)
        self.maintenance: MaintenanceAsyncStub = rpc_pb2_grpc.MaintenanceStub(self.channel)


class ConnectionPool:
    """The channels to every endpoint of one cluster; see the module docstring for the failover rule."""

    def __init__(self, endpoints: Sequence[str], *, dial_timeout: float, tls: TLSFiles | None = None) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is required")
        for endpoint in endpoints:
            parse_endpoint(endpoint)
        self.endpoints: tuple[str, ...] = tuple(endpoints)
        self._dial_timeout = dial_timeout
        self._tls = tls  # client certificate and CA for https:// endpoints
        self._connections: dict[int, Connection] = {}  # endpoint index -> its channel, created on first use
        self._current = 0  # index of the endpoint calls go to; advanced only by failed()
        self.closed = False  # set by close(); loops that see it stop resuming

    def current(self) -> Connection:
        """The connection to use for the next call."""
        if self.closed:
            raise Unavailable("etcd client is closed")
        conn = self._connections.get(self._current)
        if conn is None:
            conn = self._connections[self._current] = Connection(self.endpoints[self._current], tls=self._tls)
        return conn

    def failed(self, conn: Connection) -> None:
        """Report that `conn` could not serve a call: later calls go to the next endpoint."""
        if len(self.endpoints) == 1 or self.endpoints[self._current] != conn.endpoint:
            return
        self._current = (self._current + 1) % len(self.endpoints)
        log.warning("etcd endpoint failed over", failed=conn.endpoint, next=self.endpoints[self._current])

    def interrupted_by_close(self) -> bool:
        """True when a CancelledError just caught came from `close()` cancelling our calls rather than from
        the running task being cancelled: the caller should raise Unavailable instead."""
        task = asyncio.current_task()
        return self.closed and (task is None or task.cancelling() == 0)

    def stream_broken(self, conn: Connection, exc: grpc.aio.AioRpcError, *, what: str, **context: object) -> None:
        """Handle a stream (`what`: "watch", "lease keepalive") that failed on `conn`: raise the error it
        must end with, or record the failure, log it with `context` and return so the caller reopens it."""
        if self.closed:
            raise Unavailable(f"etcd client closed during {what}") from exc
        if exc.code() not in STREAM_RETRY_CODES:
            raise etcd_error(exc, endpoint=conn.endpoint) from exc
        if fails_over(exc):
            self.failed(conn)
        log.warning(
            f"etcd {what} broken; reopening",
            endpoint=conn.endpoint,
            code=exc.code().name,
            detail=exc.details(),
            **context,
        )

    async def dial(self) -> None:
        """Wait until one endpoint accepts a connection, trying each for `dial_timeout` seconds in turn.

        Raises Unavailable when none does.
        """
        for _ in self.endpoints:
            conn = self.current()
            try:
                await asyncio.wait_for(conn.channel.channel_ready(), self._dial_timeout)
            except TimeoutError:
                log.warning("etcd endpoint not reachable", endpoint=conn.endpoint, timeout=self._dial_timeout)
                self._current = (self._current + 1) % len(self.endpoints)
                continue
            return
        raise Unavailable(f"etcd unreachable at {', '.join(self.endpoints)} (dial timeout {self._dial_timeout}s)")

    async def close(self) -> None:
        """Close every channel; calls and streams still running on them end with Unavailable."""
        self.closed = True
        connections, self._connections = list(self._connections.values()), {}
        for conn in connections:
            await conn.channel.close()


__all__ = ["CHANNEL_OPTIONS", "Connection", "ConnectionPool", "MAX_MESSAGE_BYTES", "parse_endpoint"]
