"""A resumable etcd watch: one gRPC stream per watch, re-created whenever it breaks.

Guarantees of `watch_batches` (relied on by `Store.watch` and the apiserver's watch cache):

- **Ordered and gapless.** Batches come in revision order; every change to the range from `start_revision` on
  is delivered, each exactly once, even across reconnects. The loop remembers the next revision it has not
  delivered (`_WatchState.next_revision`) and re-creates the watch from it, so a broken stream neither skips
  nor repeats a revision: etcd never splits one revision over two responses, except as `fragment`s, which are
  joined here before being yielded.
- **Resumes by itself.** A stream that ends, or fails with a transient gRPC error (UNAVAILABLE, a timeout, a
  reset connection), is opened again after a jittered exponential backoff (50–100 ms doubling to 1–2 s), on the
  next endpoint when the member is unreachable.
- **Progress.** With `progress_notify` the server sends an empty response while the watcher is idle and
  caught up; it is yielded as an empty batch carrying the store revision, which also advances the resume point.
- **Expired.** A start revision older than the last compaction raises `caravanserai.errors.Expired`: the
  history is gone and the caller must list again. It is never retried.
- **Never silent.** The iterator ends only by raising (Expired, a non-transient error, or Unavailable once the
  client is closed) or by the consumer leaving it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

import grpc
import structlog

from caravanserai.api.etcd import rpc_pb2
from caravanserai.backoff import Backoff
from caravanserai.clock import Clock
from caravanserai.errors import Expired, Unavailable
from caravanserai.storage.etcd_connection import ConnectionPool
from caravanserai.storage.etcd_types import Event, EventBatch

log = structlog.get_logger(__name__)

# Delays of 50–100 ms doubling to 1–2 s: jitter spreads out the reconnects of many watchers after one etcd restart.
RECONNECT_BACKOFF = Backoff(initial=0.05, cap=1.0, jitter=1.0, reset_after=None)


class _WatchCanceled(Exception):
    """The server cancelled the watcher for a reason other than compaction: open it again."""


@dataclass(slots=True)
class _WatchState:
    key: bytes
    range_end: bytes
    prev_kv: bool
    progress_notify: bool
    next_revision: int  # first revision not yet delivered; 0 until the first stream tells us "now"
    fragments: list[Event] = field(default_factory=list)  # events of a revision still arriving in fragments

    def create_request(self) -> rpc_pb2.WatchRequest:
        create = rpc_pb2.WatchCreateRequest(
            key=self.key,
            range_end=self.range_end,
            start_revision=self.next_revision,
            progress_notify=self.progress_notify,
            prev_kv=self.prev_kv,
            fragment=True,
        )
        return rpc_pb2.WatchRequest(create_request=create)

    def absorb(self, resp: rpc_pb2.WatchResponse) -> EventBatch | None:
        """Turn one response into the batch to yield, or None when there is nothing to yield yet."""
        if resp.compact_revision:
            raise Expired(
                f"etcd watch from revision {self.next_revision}: history compacted up to {resp.compact_revision}"
            )
        if resp.canceled:
            raise _WatchCanceled(resp.cancel_reason or "canceled by the server")
        if resp.created:
            if self.next_revision == 0:
                self.next_revision = resp.header.revision + 1
            return None
        if resp.events or self.fragments:
            self.fragments.extend(Event.from_proto(e) for e in resp.events)
            if resp.fragment:
                return None
            events, self.fragments = self.fragments, []
            self.next_revision = events[-1].revision + 1
            return EventBatch(events[-1].revision, events)
        # A progress notification: nothing at or below header.revision is still to come.
        self.next_revision = max(self.next_revision, resp.header.revision + 1)
        return EventBatch(resp.header.revision, [])


async def _next_batch(
    call: grpc.aio.StreamStreamCall[rpc_pb2.WatchRequest, rpc_pb2.WatchResponse], state: _WatchState
) -> EventBatch | None:
    """Read responses until one yields a batch; None when the server ended the stream."""
    while True:
        resp = await call.read()
        if resp is grpc.aio.EOF:
            return None
        assert isinstance(resp, rpc_pb2.WatchResponse)
        batch = state.absorb(resp)
        if batch is not None:
            return batch


async def watch_batches(
    pool: ConnectionPool,
    key: bytes,
    range_end: bytes,
    *,
    start_revision: int,
    prev_kv: bool,
    progress_notify: bool,
    clock: Clock,
) -> AsyncGenerator[EventBatch, None]:
    """Watch [key, range_end) from `start_revision` (0: from now on); see the module docstring."""
    state = _WatchState(key, range_end, prev_kv, progress_notify, start_revision)
    backoff = RECONNECT_BACKOFF.start(clock)
    while True:
        conn = pool.current()
        call = conn.watch.Watch()
        try:
            await call.write(state.create_request())
            while (batch := await _next_batch(call, state)) is not None:
                backoff.reset()
                yield batch
            log.info("etcd watch stream ended; resuming", endpoint=conn.endpoint, revision=state.next_revision)
        except grpc.aio.AioRpcError as exc:
            pool.stream_broken(conn, exc, what="watch", revision=state.next_revision)
        except asyncio.CancelledError:
            if pool.interrupted_by_close():
                raise Unavailable("etcd client closed while watching") from None
            raise
        except _WatchCanceled as exc:
            log.warning("etcd watch canceled by the server; reopening", reason=str(exc), revision=state.next_revision)
        finally:
            call.cancel()
        state.fragments.clear()
        await backoff.wait()


__all__ = ["watch_batches"]
