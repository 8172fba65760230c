"""The etcd client against a real etcd: KV, transactions, errors, leases, watch, failover."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator

import pytest

from caravanserai.errors import Expired, Invalid, NotFound, Unavailable
from caravanserai.storage import EtcdClient
from caravanserai.storage.etcd_types import (
    Compare,
    DeleteOp,
    Event,
    EventBatch,
    PutOp,
    PutResult,
    RangeOp,
    RangeResult,
    prefix_end,
)
from caravanserai.testing import EtcdServer, free_port
from caravanserai.testing.etcd import EtcdStartError


@pytest.fixture
def prefix() -> bytes:
    return f"/client-test-{uuid.uuid4().hex[:10]}/".encode()


async def next_events(batches: AsyncGenerator[EventBatch, None], *, timeout: float = 5.0) -> EventBatch:
    """The next batch that carries events (skipping progress notifications)."""
    async with asyncio.timeout(timeout):
        async for batch in batches:
            if batch.events:
                return batch
    raise AssertionError("watch ended")


def test_prefix_end() -> None:
    assert prefix_end(b"/a/") == b"/a0"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") == b"\0"


async def test_put_range_delete(etcd_client: EtcdClient, prefix: bytes) -> None:
    for i in range(5):
        await etcd_client.put(prefix + f"k{i}".encode(), f"v{i}".encode())
    everything = await etcd_client.range(prefix, prefix_end(prefix))
    assert [kv.value for kv in everything.kvs] == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    assert everything.count == 5 and not everything.more

    page = await etcd_client.range(prefix, prefix_end(prefix), limit=2, keys_only=True)
    assert [kv.key for kv in page.kvs] == [prefix + b"k0", prefix + b"k1"]
    assert page.more and page.count == 5 and page.kvs[0].value == b""

    counted = await etcd_client.range(prefix, prefix_end(prefix), count_only=True)
    assert counted.count == 5 and counted.kvs == []

    put = await etcd_client.put(prefix + b"k0", b"new", prev_kv=True)
    assert put.prev_kv is not None and put.prev_kv.value == b"v0"
    single = await etcd_client.range(prefix + b"k0", serializable=True)
    assert single.kvs[0].value == b"new" and single.kvs[0].version == 2
    assert single.kvs[0].mod_revision == put.revision

    deleted = await etcd_client.delete_range(prefix, prefix_end(prefix), prev_kv=True)
    assert deleted.deleted == 5 and len(deleted.prev_kvs) == 5
    assert (await etcd_client.range(prefix, prefix_end(prefix))).kvs == []


async def test_range_at_old_revision_reads_the_snapshot(etcd_client: EtcdClient, prefix: bytes) -> None:
    first = await etcd_client.put(prefix + b"k", b"one")
    await etcd_client.put(prefix + b"k", b"two")
    old = await etcd_client.range(prefix + b"k", revision=first.revision)
    assert old.kvs[0].value == b"one"
    assert old.revision > first.revision  # the header tells the current revision, not the one read


async def test_txn_compare_and_swap(etcd_client: EtcdClient, prefix: bytes) -> None:
    key = prefix + b"cas"
    absent = [Compare.create_revision(key, "==", 0)]
    created = await etcd_client.txn(absent, [PutOp(key, b"1")], [RangeOp(key)])
    assert created.succeeded and isinstance(created.responses[0], PutResult)

    again = await etcd_client.txn(absent, [PutOp(key, b"x")], [RangeOp(key)])
    assert not again.succeeded
    current = again.responses[0]
    assert isinstance(current, RangeResult) and current.kvs[0].value == b"1"
    assert current.kvs[0].mod_revision == created.revision

    stale = await etcd_client.txn([Compare.mod_revision(key, "==", created.revision - 1)], [PutOp(key, b"2")])
    assert not stale.succeeded and stale.responses == []
    swapped = await etcd_client.txn([Compare.mod_revision(key, "==", created.revision)], [PutOp(key, b"2")])
    assert swapped.succeeded and swapped.revision > created.revision

    removed = await etcd_client.txn([Compare.version(key, ">", 1)], [DeleteOp(key, prev_kv=True)])
    assert removed.succeeded
    assert (await etcd_client.range(key)).kvs == []


async def test_duplicate_key_in_txn_is_invalid(etcd_client: EtcdClient, prefix: bytes) -> None:
    key = prefix + b"dup"
    with pytest.raises(Invalid):
        await etcd_client.txn([], [PutOp(key, b"a"), PutOp(key, b"b")])


async def test_compacted_and_future_revisions(etcd_client: EtcdClient, prefix: bytes) -> None:
    first = await etcd_client.put(prefix + b"k", b"one")
    latest = await etcd_client.put(prefix + b"k", b"two")
    await etcd_client.compact(latest.revision)
    with pytest.raises(Expired) as info:
        await etcd_client.range(prefix + b"k", revision=first.revision)
    assert "compacted" in str(info.value) and info.value.__cause__ is not None
    with pytest.raises(Expired):
        await etcd_client.compact(first.revision)
    with pytest.raises(Invalid):
        await etcd_client.range(prefix + b"k", revision=latest.revision + 1000)


async def test_watch_delivers_ordered_events_with_prev_kv(etcd_client: EtcdClient, prefix: bytes) -> None:
    start = (await etcd_client.put(prefix + b"a", b"1")).revision
    await etcd_client.put(prefix + b"a", b"2")
    await etcd_client.delete_range(prefix + b"a")
    await etcd_client.put(prefix + b"outside", b"x")  # not under the watched sub-prefix
    sub = prefix + b"a"
    batches = etcd_client.watch(sub, prefix_end(sub), start_revision=start)
    seen: list[Event] = []
    async with contextlib.aclosing(batches):
        while len(seen) < 3:
            seen.extend((await next_events(batches)).events)
    assert [(e.type, e.revision) for e in seen] == [("PUT", start), ("PUT", start + 1), ("DELETE", start + 2)]
    assert seen[1].prev_kv is not None and seen[1].prev_kv.value == b"1"
    assert seen[2].prev_kv is not None and seen[2].prev_kv.value == b"2"


async def test_watch_from_now_and_progress_notifications(etcd_client: EtcdClient, prefix: bytes) -> None:
    batches = etcd_client.watch(prefix, prefix_end(prefix), start_revision=0)
    async with contextlib.aclosing(batches):
        reader = asyncio.ensure_future(anext(batches))
        await asyncio.sleep(0.3)  # let the watch be created before writing
        put = await etcd_client.put(prefix + b"k", b"v")
        first = await asyncio.wait_for(reader, 5)
        assert [e.revision for e in first.events] == [put.revision]
        # Idle now: the server (notify interval 1 s) sends empty batches that carry the revision.
        progress = await asyncio.wait_for(anext(batches), 5)
        assert progress.events == [] and progress.revision >= put.revision


async def test_watch_at_compacted_revision_raises_expired(etcd_client: EtcdClient, prefix: bytes) -> None:
    first = await etcd_client.put(prefix + b"k", b"1")
    latest = await etcd_client.put(prefix + b"k", b"2")
    await etcd_client.compact(latest.revision)
    batches = etcd_client.watch(prefix, prefix_end(prefix), start_revision=first.revision)
    with pytest.raises(Expired):
        await asyncio.wait_for(anext(batches), 5)


async def test_leases(etcd_client: EtcdClient, prefix: bytes) -> None:
    lease = await etcd_client.lease_grant(2)
    assert lease.id != 0 and lease.ttl >= 2
    await etcd_client.put(prefix + b"leased", b"v", lease=lease.id)
    keeper = asyncio.create_task(etcd_client.keep_alive(lease.id, ttl=lease.ttl))
    await asyncio.sleep(lease.ttl + 1.5)  # past the TTL: only the keepalive holds the key
    assert (await etcd_client.range(prefix + b"leased")).kvs[0].lease == lease.id
    await etcd_client.lease_revoke(lease.id)
    with pytest.raises(NotFound):
        await asyncio.wait_for(keeper, 5)
    assert (await etcd_client.range(prefix + b"leased")).kvs == []
    with pytest.raises(NotFound):
        await etcd_client.lease_revoke(lease.id)


async def test_status(etcd_client: EtcdClient) -> None:
    status = await etcd_client.status()
    assert status.version.startswith("3.") and status.leader == status.member_id and status.errors == []


async def test_unreachable_endpoint_is_unavailable() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(Unavailable, match="unreachable"):
        async with EtcdClient([dead], dial_timeout=0.3):
            pass
    with pytest.raises(ValueError):
        EtcdClient(["ftp://127.0.0.1:2379"])


async def test_failover_between_endpoints(etcd: EtcdServer, prefix: bytes) -> None:
    async with EtcdServer() as other:
        dead = f"http://127.0.0.1:{free_port()}"
        async with EtcdClient([dead, other.endpoint, etcd.endpoint], dial_timeout=0.3) as client:
            # Dialing skipped the dead endpoint; calls go to `other`.
            await client.put(prefix + b"k", b"other")
            other.kill()
            # A read fails over at once and is answered by the next endpoint (the session's etcd).
            assert (await client.range(prefix + b"k")).kvs == []
            # A write is never retried: the first one after a failure either succeeds or raises.
            await client.put(prefix + b"k", b"session")
            assert (await client.range(prefix + b"k")).kvs[0].value == b"session"
        await other.restart()
        async with EtcdClient([other.endpoint]) as client:
            assert (await client.range(prefix + b"k")).kvs[0].value == b"other"


async def test_write_to_dead_member_raises_unavailable_without_retry() -> None:
    async with EtcdServer() as server, EtcdClient([server.endpoint]) as client:
        server.kill()
        with pytest.raises(Unavailable) as info:
            await client.put(b"/k", b"v")
        assert info.value.__cause__ is not None


async def test_closing_the_client_ends_a_watch_with_unavailable(etcd: EtcdServer, prefix: bytes) -> None:
    client = EtcdClient([etcd.endpoint])
    await client.connect()
    batches = client.watch(prefix, prefix_end(prefix), start_revision=0)
    reader = asyncio.ensure_future(anext(batches))
    await asyncio.sleep(0.2)
    await client.close()
    with pytest.raises(Unavailable):
        await asyncio.wait_for(reader, 5)


async def test_missing_etcd_binary_names_the_debian_package() -> None:
    with pytest.raises(EtcdStartError, match="etcd-server"):
        await EtcdServer(binary="etcd-that-is-not-installed").start()
