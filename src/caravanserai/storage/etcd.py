"""A thin asyncio client for etcd v3 over grpc.aio: KV, transactions, leases, watch and status.

    async with EtcdClient(["http://127.0.0.1:2379"]) as etcd:
        res = await etcd.txn(
            compare=[Compare.create_revision(b"/k", "==", 0)],
            success=[PutOp(b"/k", b"v")],
        )
        async for batch in etcd.watch(b"/k", start_revision=res.revision + 1):
            ...

Guarantees:

- **Errors are ours.** Every gRPC failure surfaces as a `caravanserai.errors` type raised `from` the gRPC
  error: unreachable member or deadline → Unavailable; compacted revision → Expired; see `etcd_errors`.
- **Failover.** With several endpoints, a call that finds its member unreachable, or loses its connection with
  the call in flight (`etcd_errors.fails_over`), moves the client to the next one. Reads (Range, Status,
  read-only Txn) are retried at once on the next endpoint; writes are *never* retried, because a write whose
  answer was lost may have been applied: the caller gets Unavailable and decides (the store's writes are
  compare-and-swap, so a caller re-reads and decides again).
- **Deadlines.** Unary calls carry `request_timeout`; streams (watch, keepalive) have none and are kept
  alive by HTTP/2 pings instead.
- **Watch** is ordered, gapless and resumes itself; see `etcd_watch`.

Only `caravanserai.storage` uses this module; everything above it talks to the `Store`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from types import TracebackType
from typing import Self, TypeVar

import grpc
import structlog

from caravanserai.api.etcd import rpc_pb2
from caravanserai.backoff import Backoff, BackoffState
from caravanserai.clock import Clock, SystemClock
from caravanserai.errors import NotFound, Unavailable
from caravanserai.process.tls import TLSFiles
from caravanserai.storage.etcd_connection import Connection, ConnectionPool
from caravanserai.storage.etcd_errors import etcd_error, fails_over
from caravanserai.storage.etcd_types import (
    Compare,
    DeleteResult,
    EtcdLease,
    EventBatch,
    Op,
    PutResult,
    RangeOp,
    RangeResult,
    Status,
    TxnResult,
)
from caravanserai.storage.etcd_watch import watch_batches

log = structlog.get_logger(__name__)

T = TypeVar("T")


class EtcdClient:
    """Connection to one etcd cluster. Use as `async with`; see the module docstring for the guarantees."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        dial_timeout: float = 5.0,
        request_timeout: float = 10.0,
        clock: Clock | None = None,
        tls: TLSFiles | None = None,
    ) -> None:
        self._pool = ConnectionPool(endpoints, dial_timeout=dial_timeout, tls=tls)
        self._request_timeout = request_timeout
        self._clock: Clock = clock or SystemClock()

    @property
    def endpoints(self) -> tuple[str, ...]:
        return self._pool.endpoints

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def connect(self) -> None:
        """Wait until an endpoint accepts a connection (Unavailable after `dial_timeout` per endpoint)."""
        try:
            await self._pool.dial()
        except Unavailable:
            await self._pool.close()
            raise

    async def close(self) -> None:
        """Close the channels; running watches end with Unavailable."""
        await self._pool.close()

    async def _unary(self, call: Callable[[Connection], Awaitable[T]], *, idempotent: bool) -> T:
        """Run one unary call on the current endpoint, failing over as the module docstring says."""
        attempts = len(self._pool.endpoints) if idempotent else 1
        for attempt in range(1, attempts + 1):
            conn = self._pool.current()
            try:
                return await call(conn)
            except asyncio.CancelledError:
                if self._pool.interrupted_by_close():
                    raise Unavailable("etcd client closed during a call") from None
                raise
            except grpc.aio.AioRpcError as exc:
                if not fails_over(exc):
                    raise etcd_error(exc, endpoint=conn.endpoint) from exc
                self._pool.failed(conn)
                if attempt == attempts:
                    raise etcd_error(exc, endpoint=conn.endpoint) from exc
                log.info("etcd read failed over", endpoint=conn.endpoint, code=exc.code().name)
        raise AssertionError("unreachable")

    # -- KV ------------------------------------------------------------------------------------------------

    async def range(
        self,
        key: bytes,
        range_end: bytes = b"",
        *,
        limit: int = 0,
        revision: int = 0,
        keys_only: bool = False,
        count_only: bool = False,
        serializable: bool = False,
    ) -> RangeResult:
        """Keys in [key, range_end) (just `key` when range_end is empty), ascending, at most `limit` (0: all).

        `revision` > 0 reads that snapshot (Expired when compacted). Linearizable unless `serializable`.
        """
        req = rpc_pb2.RangeRequest(
            key=key,
            range_end=range_end,
            limit=limit,
            revision=revision,
            keys_only=keys_only,
            count_only=count_only,
            serializable=serializable,
        )
        resp = await self._unary(lambda c: c.kv.Range(req, timeout=self._request_timeout), idempotent=True)
        return RangeResult.from_proto(resp)

    async def put(self, key: bytes, value: bytes, *, lease: int = 0, prev_kv: bool = False) -> PutResult:
        """Write `key` unconditionally. The store never calls this (it writes through `txn`)."""
        req = rpc_pb2.PutRequest(key=key, value=value, lease=lease, prev_kv=prev_kv)
        resp = await self._unary(lambda c: c.kv.Put(req, timeout=self._request_timeout), idempotent=False)
        return PutResult.from_proto(resp)

    async def delete_range(self, key: bytes, range_end: bytes = b"", *, prev_kv: bool = False) -> DeleteResult:
        """Delete `key`, or every key in [key, range_end), unconditionally."""
        req = rpc_pb2.DeleteRangeRequest(key=key, range_end=range_end, prev_kv=prev_kv)
        resp = await self._unary(lambda c: c.kv.DeleteRange(req, timeout=self._request_timeout), idempotent=False)
        return DeleteResult.from_proto(resp)

    async def txn(self, compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()) -> TxnResult:
        """Atomically: if every compare holds apply `success`, else `failure`. A txn of only reads is retried
        on failover like `range`; one that writes is not."""
        req = rpc_pb2.TxnRequest(
            compare=[c.to_proto() for c in compare],
            success=[op.to_proto() for op in success],
            failure=[op.to_proto() for op in failure],
        )
        read_only = all(isinstance(op, RangeOp) for op in (*success, *failure))
        resp = await self._unary(lambda c: c.kv.Txn(req, timeout=self._request_timeout), idempotent=read_only)
        return TxnResult.from_proto(resp)

    async def compact(self, revision: int, *, physical: bool = True) -> None:
        """Discard history below `revision`. Expired when already compacted past it."""
        req = rpc_pb2.CompactionRequest(revision=revision, physical=physical)
        await self._unary(lambda c: c.kv.Compact(req, timeout=self._request_timeout), idempotent=False)

    # -- Leases --------------------------------------------------------------------------------------------

    async def lease_grant(self, ttl: int, *, lease_id: int = 0) -> EtcdLease:
        """A new lease living `ttl` seconds unless kept alive; `lease_id` 0 lets etcd choose the id."""
        req = rpc_pb2.LeaseGrantRequest(ttl=ttl, id=lease_id)
        resp = await self._unary(lambda c: c.lease.LeaseGrant(req, timeout=self._request_timeout), idempotent=False)
        return EtcdLease(resp.id, resp.ttl)

    async def lease_revoke(self, lease_id: int) -> None:
        """End a lease now, deleting its keys. NotFound when it does not exist (or already expired)."""
        req = rpc_pb2.LeaseRevokeRequest(id=lease_id)
        await self._unary(lambda c: c.lease.LeaseRevoke(req, timeout=self._request_timeout), idempotent=False)

    async def keep_alive(self, lease_id: int, *, ttl: int) -> None:
        """Keep a lease alive until cancelled: one stream renewing every ttl/3 seconds, reopened after
        failures with backoff. Raises NotFound once etcd says the lease is gone (expired or revoked)."""
        # Delays of 50–100 ms doubling to ttl/12–ttl/6 (at least 0.1–0.2 s): renewals resume well within the ttl.
        backoff = Backoff(initial=0.05, cap=max(0.1, ttl / 12), jitter=1.0, reset_after=None).start(self._clock)
        while True:
            conn = self._pool.current()
            call = conn.lease.LeaseKeepAlive()
            try:
                await self._renew_forever(call, lease_id, interval=max(0.1, ttl / 3), backoff=backoff)
            except grpc.aio.AioRpcError as exc:
                self._pool.stream_broken(conn, exc, what="lease keepalive", lease=lease_id)
            except asyncio.CancelledError:
                if self._pool.interrupted_by_close():
                    raise Unavailable("etcd client closed while keeping a lease alive") from None
                raise
            finally:
                call.cancel()
            await backoff.wait()

    async def _renew_forever(
        self,
        call: grpc.aio.StreamStreamCall[rpc_pb2.LeaseKeepAliveRequest, rpc_pb2.LeaseKeepAliveResponse],
        lease_id: int,
        *,
        interval: float,
        backoff: BackoffState,
    ) -> None:
        """Renew on `call` every `interval` seconds; returns when the server ends the stream."""
        while True:
            await call.write(rpc_pb2.LeaseKeepAliveRequest(id=lease_id))
            resp = await call.read()
            if resp is grpc.aio.EOF:
                return
            assert isinstance(resp, rpc_pb2.LeaseKeepAliveResponse)
            if resp.ttl <= 0:
                raise NotFound(f"etcd lease {lease_id:x} expired or was revoked")
            backoff.reset()
            await self._clock.sleep(interval)

    # -- Watch and status ----------------------------------------------------------------------------------

    def watch(
        self,
        key: bytes,
        range_end: bytes = b"",
        *,
        start_revision: int,
        prev_kv: bool = True,
        progress_notify: bool = True,
    ) -> AsyncGenerator[EventBatch, None]:
        """Batches of changes to [key, range_end) from `start_revision` (inclusive; 0: from now on).

        Ordered, gapless, resumes itself after failures; Expired when `start_revision` (or the resume
        point) was compacted. Empty batches are progress notifications. See `etcd_watch`. Close it with
        `aclose()` (e.g. through `contextlib.aclosing`) to end the stream at once.
        """
        return watch_batches(
            self._pool,
            key,
            range_end,
            start_revision=start_revision,
            prev_kv=prev_kv,
            progress_notify=progress_notify,
            clock=self._clock,
        )

    async def status(self) -> Status:
        """Version, leader, revision and database size of the member that answers."""
        req = rpc_pb2.StatusRequest()
        resp = await self._unary(lambda c: c.maintenance.Status(req, timeout=self._request_timeout), idempotent=True)
        return Status.from_proto(resp)


__all__ = ["EtcdClient"]
