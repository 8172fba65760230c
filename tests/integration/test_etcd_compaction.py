"""Periodic compaction against a real etcd: one interval of history kept, one compaction per interval whatever the
number of apiservers, and the apiserver's watch history trimmed to what etcd keeps."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.errors import Expired
from caravanserai.storage import EtcdClient, Store
from caravanserai.storage.compaction import Compactor, Round, compaction_key
from caravanserai.testing import EtcdServer
from caravanserai.testing.apiserver import apiserver
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for


def _prefix() -> str:
    return f"/test-{uuid.uuid4().hex[:12]}"


async def _write(etcd_client: EtcdClient, prefix: str, count: int) -> int:
    """`count` writes under `prefix`; the revision of the last."""
    revision = 0
    for i in range(count):
        revision = (await etcd_client.put(f"{prefix}/things/t{i}".encode(), b"x")).revision
    return revision


async def _compacted(store: Store, revision: int) -> bool:
    try:
        await store.list("things", limit=1, revision=revision)
    except Expired:
        return True
    return False


async def test_a_round_compacts_to_the_revision_seen_one_round_earlier(etcd_client: EtcdClient) -> None:
    prefix = _prefix()
    store = Store(etcd_client, prefix=prefix)
    learned: list[int] = []
    compactor = Compactor(
        etcd_client,
        compact=store.compact,
        prefix=prefix,
        interval=300,
        clock=SystemClock(),
        on_compacted=learned.append,
    )
    before = await _write(etcd_client, prefix, 3)
    first = await compactor.tick(0, 0)
    assert first.compacted == 0 and first.revision > before  # the first round only records where etcd is
    after = await _write(etcd_client, prefix, 3)
    second = await compactor.tick(first.version, first.revision)
    assert second.compacted == first.revision and learned == [first.revision]
    assert await _compacted(store, before)  # older than the target: gone
    assert not await _compacted(store, first.revision)  # the last round's writes are kept
    assert not await _compacted(store, after)
    key = await etcd_client.range(compaction_key(prefix))
    assert int(key.kvs[0].value) == first.revision and key.kvs[0].version == second.version


async def test_two_apiservers_do_not_both_compact_in_one_round(etcd_client: EtcdClient) -> None:
    prefix = _prefix()
    learned: dict[str, list[int]] = {"a": [], "b": []}
    store = Store(etcd_client, prefix=prefix)
    a, b = (
        Compactor(
            etcd_client,
            compact=store.compact,
            prefix=prefix,
            interval=300,
            clock=SystemClock(),
            on_compacted=learned[name].append,
        )
        for name in ("a", "b")
    )
    last_a, last_b = Round(0, 0, 0), Round(0, 0, 0)
    compactions = []
    for turn in range(6):
        await _write(etcd_client, prefix, 2)
        first, second = (a, b) if turn % 2 == 0 else (b, a)  # whoever ticks first in a round takes it
        rounds = {}
        for compactor in (first, second):
            mine = last_a if compactor is a else last_b
            rounds[compactor] = await compactor.tick(mine.version, mine.revision)
        last_a, last_b = rounds[a], rounds[b]
        compactions.append(sum(1 for r in rounds.values() if r.compacted))
        assert last_a.version == last_b.version  # the loser of a round is in step for the next one
    assert compactions[0] == 0  # the first round records the revision only
    assert max(compactions) <= 1  # never both in one round
    assert sum(compactions) >= 3  # and rounds do compact (a loser's next round has a stale target only once)
    assert learned["a"] and learned["b"]  # both learn every compaction, done or seen


async def test_running_compactors_compact_once_per_interval(etcd_client: EtcdClient) -> None:
    prefix = _prefix()
    calls: list[int] = []
    original = etcd_client.compact

    async def counting(revision: int, *, physical: bool = True) -> None:
        calls.append(revision)
        await original(revision, physical=physical)

    etcd_client.compact = counting  # type: ignore[method-assign]  # count the compactions both compactors make
    interval = 0.3
    store = Store(etcd_client, prefix=prefix)
    compactors = [
        Compactor(etcd_client, compact=store.compact, prefix=prefix, interval=interval, clock=SystemClock())
        for _ in range(2)
    ]
    loop = asyncio.get_running_loop()
    started = loop.time()
    tasks = [asyncio.create_task(c.run()) for c in compactors]
    try:
        for _ in range(12):
            await _write(etcd_client, prefix, 1)
            await asyncio.sleep(interval / 2)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    rounds = (loop.time() - started) / interval
    assert 1 <= len(calls) <= rounds  # two compactors, at most one compaction per interval
    assert calls == sorted(calls)


@pytest.mark.parametrize("interval", [0.4])
async def test_the_apiserver_compacts_and_trims_its_watch_history(etcd: EtcdServer, interval: float) -> None:
    async with apiserver(etcd.endpoint, compaction_interval=interval) as api, Client(api.address) as client:
        created = await client.projects.create(project("p"))
        old = int(created.metadata.resource_version)
        obj = created
        for i in range(3):
            obj.metadata.annotations["i"] = str(i)
            obj = await client.projects.update(obj)
        store = api.server.service._store  # type: ignore[union-attr]  # started: service is set  # noqa: SLF001

        async def compacted_past_old() -> bool:
            await client.projects.update(await client.projects.get("p"))  # keep etcd moving
            try:
                await store.list("projects", limit=1, revision=old)
            except Expired:
                return True
            return False

        await wait_for(compacted_past_old, timeout=20, interval=interval / 2)
        cache = api.server.service._caches["projects"]  # type: ignore[union-attr]  # noqa: SLF001
        await wait_for(lambda: cache._history.oldest >= old, timeout=10)  # noqa: SLF001
        with pytest.raises(Expired):  # the cache no longer serves what etcd has compacted
            async for _ in client.projects.watch(resource_version=str(old - 1)):
                pass
