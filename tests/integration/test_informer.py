"""Informers against a real apiserver over a real etcd: list+watch, selectors, indexes, the shared factory, and
the resume protocol when the apiserver dies mid-stream, when etcd history is compacted while the informer is
away, and when objects are deleted meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import AlreadyExists, InternalError, Unavailable
from caravanserai.informer import (
    LABEL_INDEX,
    NODE_REF_INDEX,
    NODE_REF_INDEXERS,
    Backoff,
    Informer,
    SharedInformerFactory,
    WatchOptions,
)
from caravanserai.storage import EtcdClient, Store
from caravanserai.testing.apiserver import RunningApiServer, start_apiserver
from caravanserai.testing.builders import node, project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for

FAST = Backoff(initial=0.05, cap=0.3)


@contextlib.asynccontextmanager
async def running(coro: Coroutine[Any, Any, None]) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(coro)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class Recorder:
    """Every notification of an informer, and whether the cache already held it when the handler ran."""

    def __init__(self, informer: Informer[Any]) -> None:
        self.informer = informer
        self.adds: list[str] = []
        self.updates: list[str] = []
        self.deletes: list[str] = []
        self.cache_behind = 0
        informer.add_event_handler(on_add=self.on_add, on_update=self.on_update, on_delete=self.on_delete)

    def on_add(self, obj: Any) -> None:
        self.adds.append(obj.metadata.name)
        self._check_cache(obj)

    def on_update(self, old: Any, new: Any) -> None:
        self.updates.append(new.metadata.name)
        self._check_cache(new)

    def on_delete(self, obj: Any) -> None:
        self.deletes.append(obj.metadata.name)

    def _check_cache(self, obj: Any) -> None:
        cached = self.informer.get(meta.key_of(obj))
        if cached is not None and int(cached.metadata.resource_version) < int(obj.metadata.resource_version):
            self.cache_behind += 1


async def create_retrying(client: Client, obj: v1.Project, *, timeout: float = 10.0) -> None:
    """Create, retrying while the apiserver is away; AlreadyExists means an earlier try got through.

    A call in flight when the apiserver stops ends CANCELLED, which the client reports as InternalError.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            await client.projects.create(obj)
            return
        except AlreadyExists:
            return
        except (Unavailable, InternalError):  # InternalError: a call cancelled by the stopping server
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.02)


async def watching(informer: Informer[Any], client: Client) -> None:
    """Wait until `informer`'s watch is established and caught up: a bookmark at or past the current version.

    Stopping the apiserver while a watch request is still on its way can leave that stream open on the stopped
    server (it then sends bookmarks forever), and a bookmark may briefly carry a version older than the list's
    (the server's watch cache lags etcd): apiserver issues reported separately; these tests wait them out.
    """
    current = int((await client.projects.list(limit=1)).resource_version)
    await wait_for(lambda: int(informer.reflector.resource_version or 0) >= current, 5)


async def etcd_names(client: Client) -> list[str]:
    return sorted(meta.key_of(o) for o in (await client.projects.list()).items)


async def test_informer_lists_watches_filters_and_indexes(client: Client) -> None:
    for name, app in (("web-1", "web"), ("web-2", "web"), ("db-1", "db")):
        await client.projects.create(project(name, labels={"app": app}))
    factory = SharedInformerFactory(client, watch_options=WatchOptions(backoff=FAST))
    web = factory.informer(v1.Project, label_selector="app=web", indexers=NODE_REF_INDEXERS)
    everything = factory.informer("projects")
    assert factory.informer(v1.Project, label_selector="app=web") is web
    web_events = Recorder(web)

    async with running(factory.run()):
        await factory.wait_synced()
        assert web.cache.keys() == ["default/web-1", "default/web-2"] and len(everything.cache) == 3
        assert web_events.adds == ["web-1", "web-2"]

        moved = await client.projects.get("db-1")
        moved.metadata.labels["app"] = "web"  # enters the selection: an add
        await client.projects.update(moved)
        left = await client.projects.get("web-1")
        left.metadata.labels["app"] = "batch"  # leaves it: a delete
        await client.projects.update(left)
        await client.nodes.create(node("n1"))
        bound = await client.projects.get("web-2")
        bound.status.phase = v1.SCHEDULED
        bound.status.node_ref = "n1"
        await client.projects.update_status(bound)

        await wait_for(lambda: web_events.deletes == ["web-1"] and web_events.updates == ["web-2"], 5)
        assert web_events.adds == ["web-1", "web-2", "db-1"]
        assert web.cache.keys() == ["default/db-1", "default/web-2"]
        assert [o.metadata.name for o in web.by_index(NODE_REF_INDEX, "n1")] == ["web-2"]
        assert [o.metadata.name for o in web.by_index(LABEL_INDEX, "app=web")] == ["db-1", "web-2"]
        assert everything.cache.keys() == ["default/db-1", "default/web-1", "default/web-2"]
        assert web.reflector.watches == 1 and web.reflector.lists == 1
    assert web_events.cache_behind == 0


async def test_informer_resumes_after_the_apiserver_dies_mid_stream(etcd: EtcdServer) -> None:
    api = await start_apiserver(etcd.endpoint, bookmark_interval=0.2)
    try:
        async with Client(api.address, timeout=5, retry_timeout=5) as client:
            factory = SharedInformerFactory(client, watch_options=WatchOptions(backoff=FAST))
            projects = factory.informer(v1.Project)
            events = Recorder(projects)
            async with running(factory.run()):
                await factory.wait_synced()
                await watching(projects, client)
                writer = asyncio.create_task(write_projects(client, 60))
                await wait_for(lambda: len(events.adds) >= 15, 10)
                await api.stop()  # mid-stream: the writer keeps trying, the watch breaks
                await asyncio.sleep(0.3)
                api = await start_apiserver(etcd.endpoint, prefix=api.prefix, listen=api.address, bookmark_interval=0.2)
                await writer
                await wait_for(lambda: len(projects.cache) == 60, 10)
                assert projects.cache.keys() == await etcd_names(client)

            assert sorted(events.adds) == [f"p{i:02d}" for i in range(60)]  # each exactly once
            assert events.deletes == [] and events.updates == []
            assert projects.reflector.lists == 1  # resumed from its version: no relist
            assert projects.reflector.watches >= 2
            assert events.cache_behind == 0
    finally:
        await api.stop()


async def write_projects(client: Client, count: int) -> None:
    for i in range(count):
        await create_retrying(client, project(f"p{i:02d}"))
        await asyncio.sleep(0.005)


async def test_relist_after_compaction_converges_and_delivers_every_missed_deletion(
    etcd: EtcdServer, etcd_client: EtcdClient
) -> None:
    api = await start_apiserver(etcd.endpoint, bookmark_interval=0.2)
    try:
        async with Client(api.address, timeout=5, retry_timeout=5) as client:
            for i in range(30):
                await client.projects.create(project(f"p{i:02d}", labels={"batch": str(i % 3)}))
            factory = SharedInformerFactory(client, watch_options=WatchOptions(backoff=FAST))
            projects = factory.informer(v1.Project)
            events = Recorder(projects)
            async with running(factory.run()):
                await factory.wait_synced()
                await watching(projects, client)
                await api.stop()  # the informer is cut off ...
                await change_while_away(etcd, api.prefix, etcd_client)
                # ... and comes back to an apiserver whose history starts after the compaction: Expired, relist.
                api = await start_apiserver(etcd.endpoint, prefix=api.prefix, listen=api.address, bookmark_interval=0.2)
                truth = await etcd_names(client)
                await wait_for(lambda: projects.cache.keys() == truth, 10)

                assert sorted(events.deletes) == [f"p{i:02d}" for i in range(0, 30, 3)]  # every one, once
                assert events.updates == ["p01"]
                assert events.adds[30:] == ["q0", "q1"]
                assert projects.reflector.lists == 2
                cached = projects.get("default/p01")
                assert cached is not None and cached.metadata.labels["changed"] == "while-away"
                assert [o.metadata.name for o in projects.by_index(LABEL_INDEX, "batch=0")] == []
    finally:
        await api.stop()


async def change_while_away(etcd: EtcdServer, prefix: str, etcd_client: EtcdClient) -> None:
    """Through a second apiserver on the same data: delete ten projects, change one, add two; then compact."""
    async with contextlib.AsyncExitStack() as stack:
        other = await start_apiserver(etcd.endpoint, prefix=prefix, bookmark_interval=0.2)
        stack.push_async_callback(other.stop)
        client = await stack.enter_async_context(Client(other.address, timeout=5, retry_timeout=5))
        for i in range(0, 30, 3):
            await client.projects.delete(f"p{i:02d}")
        changed = await client.projects.get("p01")
        changed.metadata.labels["changed"] = "while-away"
        await client.projects.update(changed)
        for name in ("q0", "q1"):
            await client.projects.create(project(name))
    store = Store(etcd_client, prefix=prefix)
    await store.compact(await store.current_revision())


async def test_the_shared_factory_serves_all_controllers_from_one_watch(client: Client, api: RunningApiServer) -> None:
    await client.nodes.create(node("n1"))
    factory = SharedInformerFactory(client, watch_options=WatchOptions(backoff=FAST))
    first = factory.informer(v1.Node)
    second = factory.informer("nodes")
    assert first is second and len(factory.informers()) == 1
    a, b = Recorder(first), Recorder(second)
    async with running(factory.run()):
        await factory.wait_synced()
        late = factory.informer(v1.Lease)  # made while running: started at once
        await late.wait_synced()
        n = await client.nodes.get("n1")
        n.metadata.labels["zone"] = "a"
        await client.nodes.update(n)
        await wait_for(lambda: a.updates == ["n1"] and b.updates == ["n1"], 5)
    assert first.reflector.watches == 1
    assert meta.kind_for(late.resource).kind == "Lease" and late.has_synced()
