"""Unit tests of caravanserai.informer: the indexer, the order and timing of handler calls, the mutation
detector, and the reflector's resume protocol, against an in-memory stand-in for one kind of the API."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, cast

import pytest

from caravanserai import meta, v1
from caravanserai.client import Change, ObjectList
from caravanserai.clock import Clock
from caravanserai.errors import Expired, Unavailable
from caravanserai.informer import (
    LABEL_INDEX,
    NODE_REF_INDEX,
    NODE_REF_INDEXERS,
    Backoff,
    CacheMutationError,
    Indexer,
    Informer,
    MutationDetector,
    WatchOptions,
    node_ref_index,
)
from caravanserai.informer.mutation import ENV_VAR
from caravanserai.testing.builders import project
from caravanserai.testing.clock import FakeClock

FAST = Backoff(initial=0.001, cap=0.01, jitter=0.0)


class FakeConnection:
    """The `Client` behind a fake resource client: its connection never drops, so a retry waits its full delay."""

    async def retry_pause(self, delay: float, *, clock: Clock) -> bool:
        await clock.sleep(delay)
        return False


class FakeProjects:
    """Projects in memory, with the list and watch semantics of `ResourceClient` (no selectors)."""

    resource = "projects"
    kind = meta.KINDS["projects"]
    client = FakeConnection()

    def __init__(self) -> None:
        self.objects: dict[str, v1.Project] = {}
        self.revision = 0
        self.oldest = 0  # a watch from a version below this raises Expired
        self.history: list[Change[v1.Project]] = []
        self.streams: list[asyncio.Queue[Change[v1.Project] | BaseException]] = []
        self.lists = 0
        self.watch_versions: list[str] = []
        self.down = False  # while True, list and watch raise Unavailable

    def put(self, obj: v1.Project) -> v1.Project:
        self.revision += 1
        stored = meta.copy(obj)
        stored.metadata.resource_version = str(self.revision)
        if not stored.metadata.uid:
            stored.metadata.uid = f"uid-{stored.metadata.name}"
        type_ = v1.MODIFIED if stored.metadata.name in self.objects else v1.ADDED
        self.objects[stored.metadata.name] = stored
        self._emit(Change(type_, stored))
        return stored

    def remove(self, name: str) -> None:
        self.revision += 1
        gone = meta.copy(self.objects.pop(name))
        gone.metadata.resource_version = str(self.revision)
        self._emit(Change(v1.DELETED, gone))

    def bookmark(self) -> None:
        mark = v1.Project()
        mark.metadata.resource_version = str(self.revision)
        for stream in self.streams:
            stream.put_nowait(Change(v1.BOOKMARK, mark))

    def break_streams(self, error: BaseException) -> None:
        for stream in self.streams:
            stream.put_nowait(error)

    def compact(self) -> None:
        self.oldest = self.revision
        self.history.clear()

    def _emit(self, event: Change[v1.Project]) -> None:
        self.history.append(event)
        for stream in self.streams:
            stream.put_nowait(event)

    async def list(self, **_: Any) -> ObjectList[v1.Project]:
        if self.down:
            raise Unavailable("the fake API is down")
        self.lists += 1
        items = [meta.copy(o) for o in sorted(self.objects.values(), key=lambda o: o.metadata.name)]
        return ObjectList(items, str(self.revision))

    async def watch(self, *, resource_version: str = "", **_: Any) -> AsyncIterator[Change[v1.Project]]:
        if self.down:
            raise Unavailable("the fake API is down")
        self.watch_versions.append(resource_version)
        after = int(resource_version or self.revision)
        if after < self.oldest:
            raise Expired(f"too old resource version: {after}")
        stream: asyncio.Queue[Change[v1.Project] | BaseException] = asyncio.Queue()
        for event in self.history:
            if int(event.object.metadata.resource_version) > after:
                stream.put_nowait(event)
        self.streams.append(stream)
        try:
            while True:
                item = await stream.get()
                if isinstance(item, BaseException):
                    raise item
                yield Change(item.type, meta.copy(item.object))
        finally:
            self.streams.remove(stream)


COMPACT: dict[bool, type[v1.Project] | None] = {False: None, True: v1.Project}  # Indexer(compact=…) per mode


def informer_of(api: FakeProjects, **options: Any) -> Informer[v1.Project]:
    """An informer over the fake (which has the list and watch of a ResourceClient, not its type)."""
    return Informer(cast(Any, api), **options)


@contextlib.asynccontextmanager
async def running(coro: Coroutine[Any, Any, None]) -> AsyncIterator[asyncio.Task[None]]:
    """Run `coro` as a task for the block; cancel it and wait for it afterwards."""
    task = asyncio.create_task(coro)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def until(predicate: Callable[[], object], timeout: float = 2.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.001)


def bound(name: str, node: str, **labels: str) -> v1.Project:
    obj = project(name, labels=labels)
    obj.status.node_ref = node
    return obj


# ---- the indexer ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compact", [False, True], ids=["decoded", "compact"])
def test_indexer_gets_lists_and_indexes_by_label_and_custom_index(compact: bool) -> None:
    cache: Indexer[v1.Project] = Indexer(NODE_REF_INDEXERS, compact=COMPACT[compact])
    for obj in (bound("b", "n1", app="web"), bound("a", "n2", app="web"), bound("c", "n1", app="db")):
        cache.upsert(obj.metadata.name, obj)

    assert [o.metadata.name for o in cache.list()] == ["a", "b", "c"]
    assert cache.get("b") is not None and cache.get("zz") is None
    assert "a" in cache and len(cache) == 3
    assert [o.metadata.name for o in cache.by_index(LABEL_INDEX, "app=web")] == ["a", "b"]
    assert [o.metadata.name for o in cache.by_index(NODE_REF_INDEX, "n1")] == ["b", "c"]
    assert cache.by_index(NODE_REF_INDEX, "n9") == []
    assert cache.keys_by_index(NODE_REF_INDEX, "n1") == ["b", "c"] and cache.keys_by_index(NODE_REF_INDEX, "n9") == []
    assert cache.index_values(NODE_REF_INDEX) == ["n1", "n2"]


@pytest.mark.parametrize("compact", [False, True], ids=["decoded", "compact"])
def test_indexer_moves_index_entries_on_update_and_drops_them_on_delete(compact: bool) -> None:
    cache: Indexer[v1.Project] = Indexer(NODE_REF_INDEXERS, compact=COMPACT[compact])
    cache.upsert("a", bound("a", "n1", app="web"))
    old = cache.upsert("a", bound("a", "n2", app="db"))

    assert old is not None and old.status.node_ref == "n1"
    assert cache.by_index(NODE_REF_INDEX, "n1") == [] and cache.index_values(NODE_REF_INDEX) == ["n2"]
    assert cache.index_values(LABEL_INDEX) == ["app=db"]
    assert cache.delete("a") is not None and cache.delete("a") is None
    assert cache.index_values(NODE_REF_INDEX) == [] and cache.index_values(LABEL_INDEX) == []


@pytest.mark.parametrize("compact", [False, True], ids=["decoded", "compact"])
def test_indexes_added_later_file_existing_objects(compact: bool) -> None:
    cache: Indexer[v1.Project] = Indexer(compact=COMPACT[compact])
    cache.upsert("a", bound("a", "n1"))
    cache.add_indexers({NODE_REF_INDEX: node_ref_index})
    cache.add_indexers({NODE_REF_INDEX: node_ref_index})  # the same function again: nothing changes

    assert [o.metadata.name for o in cache.by_index(NODE_REF_INDEX, "n1")] == ["a"]
    with pytest.raises(ValueError, match="different function"):
        cache.add_indexers({NODE_REF_INDEX: lambda obj: []})
    with pytest.raises(KeyError, match=r"no index 'status.phase'"):
        cache.by_index("status.phase", "Pending")


# ---- the mutation detector -----------------------------------------------------------------------------------


@pytest.mark.parametrize("compact", [False, True], ids=["decoded", "compact"])
def test_mutation_detector_names_the_object_and_the_changed_field(compact: bool) -> None:
    cache: Indexer[v1.Project] = Indexer(
        compact=COMPACT[compact], detector=MutationDetector(enabled=True, kind="Project")
    )
    cache.upsert("a", project("a"))
    cache.check_mutations()  # untouched: fine

    cached = cache.get("a")
    assert cached is not None
    cached.spec.priority = 7
    with pytest.raises(CacheMutationError, match=r"cached Project 'a' was modified in place") as raised:
        cache.check_mutations()
    assert "priority: 7" in str(raised.value)
    with pytest.raises(CacheMutationError):
        cache.upsert("a", project("a"))  # replacing a mutated object is caught too


def test_compact_storage_decodes_a_fresh_read_only_message_per_read() -> None:
    cache: Indexer[v1.Project] = Indexer(NODE_REF_INDEXERS, compact=v1.Project)
    stored = bound("a", "n1", app="web")
    stored.metadata.resource_version = "7"
    cache.upsert("a", stored)
    first, second = cache.get("a"), cache.get("a")
    assert first == stored and second == stored and first is not second and first is not stored
    assert cache.version("a") == "7" and cache.version("zz") is None
    assert cache.by_index(NODE_REF_INDEX, "n1") == [stored] and cache.list() == [stored]


def test_mutation_detector_is_off_by_default_and_on_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert not MutationDetector().enabled
    monkeypatch.setenv(ENV_VAR, "1")
    assert MutationDetector().enabled
    assert not MutationDetector(enabled=False).enabled

    cache: Indexer[v1.Project] = Indexer(detector=MutationDetector())
    cache.upsert("a", project("a"))
    cached = cache.get("a")
    assert cached is not None
    cached.metadata.labels["touched"] = "yes"
    with pytest.raises(CacheMutationError, match="touched"):
        cache.check_mutations()


@pytest.mark.parametrize("compact", [False, True], ids=["decoded", "compact"])
async def test_informer_fails_loudly_when_a_handler_mutates_a_cached_object(compact: bool) -> None:
    api = FakeProjects()
    api.put(project("a"))
    informer = informer_of(api, compact=compact, detect_mutations=True, watch_options=WatchOptions(backoff=FAST))

    def careless(obj: v1.Project) -> None:
        obj.spec.priority = 100  # should have copied first

    informer.add_event_handler(on_add=careless)
    with pytest.raises(CacheMutationError, match="'a' was modified in place"):
        async with asyncio.timeout(2):
            await informer.run()


# ---- handlers ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compact", [False, True], ids=["decoded", "compact"])
async def test_handlers_run_after_the_cache_update_in_event_order(compact: bool) -> None:
    api = FakeProjects()
    api.put(project("a"))
    informer = informer_of(api, compact=compact, watch_options=WatchOptions(backoff=FAST))
    seen: list[tuple[str, str, str, bool]] = []

    def on_add(obj: v1.Project) -> None:
        seen.append(("add", obj.metadata.name, obj.metadata.resource_version, informer.get(obj.metadata.name) == obj))

    def on_update(old: v1.Project, new: v1.Project) -> None:
        in_cache = informer.get(new.metadata.name) == new  # the same message, or (compact) an equal one
        seen.append(
            ("update", new.metadata.name, f"{old.metadata.resource_version}>{new.metadata.resource_version}", in_cache)
        )

    def on_delete(obj: v1.Project) -> None:
        seen.append(
            ("delete", obj.metadata.name, obj.metadata.resource_version, informer.get(obj.metadata.name) is None)
        )

    informer.add_event_handler(on_add=on_add, on_update=on_update, on_delete=on_delete)
    async with running(informer.run()):
        await informer.wait_synced()
        assert seen == [("add", "a", "1", True)]
        # One change at a time, so that the cache holds exactly the notified state when the handler runs (with
        # changes in flight it may already hold a later one: it is never behind).
        for changed in (project("a", labels={"v": "2"}), project("b")):
            before = len(seen)
            api.put(changed)
            await until(lambda before=before: len(seen) == before + 1)
        api.remove("a")
        await until(lambda: len(seen) == 4)

    assert seen[1:] == [("update", "a", "1>2", True), ("add", "b", "3", True), ("delete", "a", "4", True)]


async def test_every_handler_hears_every_change_even_when_one_fails_or_is_async() -> None:
    api = FakeProjects()
    informer = informer_of(api, watch_options=WatchOptions(backoff=FAST))
    calls: list[str] = []

    def broken(obj: v1.Project) -> None:
        calls.append("broken:" + obj.metadata.name)
        raise RuntimeError("handler bug")

    async def slow(obj: v1.Project) -> None:
        await asyncio.sleep(0.001)
        calls.append("async:" + obj.metadata.name)

    informer.add_event_handler(on_add=broken)
    informer.add_event_handler(on_add=slow)
    async with running(informer.run()):
        await informer.wait_synced()
        api.put(project("a"))
        api.put(project("b"))
        await until(lambda: len(calls) == 4)

    assert calls == ["broken:a", "async:a", "broken:b", "async:b"]


@pytest.mark.parametrize("compact", [False, True], ids=["decoded", "compact"])
async def test_a_late_handler_first_hears_the_cached_objects_then_live_changes(compact: bool) -> None:
    api = FakeProjects()
    api.put(project("a"))
    api.put(project("b"))
    informer = informer_of(api, compact=compact, watch_options=WatchOptions(backoff=FAST))
    async with running(informer.run()):
        await informer.wait_synced()
        names: list[str] = []
        registration = informer.add_event_handler(on_add=lambda o: names.append(o.metadata.name))
        assert not registration.has_synced()
        await registration.wait_synced()
        assert names == ["a", "b"]
        api.put(project("c"))
        await until(lambda: names == ["a", "b", "c"])


async def test_resync_redelivers_every_cached_object_as_an_update_without_reading_the_server() -> None:
    clock = FakeClock()
    api = FakeProjects()
    api.put(project("a"))
    api.put(project("b"))
    informer = informer_of(api, clock=clock, resync_period=30.0, watch_options=WatchOptions(backoff=FAST))
    updates: list[tuple[str, bool]] = []
    informer.add_event_handler(on_update=lambda old, new: updates.append((new.metadata.name, old is new)))
    async with running(informer.run()):
        await informer.wait_synced()
        await until(lambda: clock.sleepers >= 2)  # the resync timer and the watchdog
        clock.advance(30.0)
        await until(lambda: len(updates) == 2)

    assert updates == [("a", True), ("b", True)]
    assert api.lists == 1


async def test_a_full_notification_backlog_holds_the_stream_back() -> None:
    api = FakeProjects()
    informer = informer_of(api, watch_options=WatchOptions(backoff=FAST), max_pending=4)
    release = asyncio.Event()
    heard: list[str] = []
    most_pending = 0

    async def stuck(obj: v1.Project) -> None:
        nonlocal most_pending
        most_pending = max(most_pending, informer.pending)
        await release.wait()
        heard.append(obj.metadata.name)

    informer.add_event_handler(on_add=stuck)
    async with running(informer.run()):
        await informer.wait_synced()
        for i in range(20):
            api.put(project(f"p{i:02d}"))
        await asyncio.sleep(0.05)
        # Four notifications wait for the handler (one more may be in its hands); the other events wait unread.
        assert 4 <= len(informer.cache) <= 5
        release.set()
        await until(lambda: len(heard) == 20)

    assert heard == [f"p{i:02d}" for i in range(20)]
    assert most_pending <= 4


# ---- the reflector's resume protocol -------------------------------------------------------------------------


async def test_a_broken_stream_resumes_from_the_last_version_without_relisting() -> None:
    api = FakeProjects()
    api.put(project("a"))
    informer = informer_of(api, watch_options=WatchOptions(backoff=FAST))
    async with running(informer.run()):
        await informer.wait_synced()
        api.put(project("b"))
        await until(lambda: informer.get("b") is not None)
        api.bookmark()
        api.put(project("c"))
        await until(lambda: informer.get("c") is not None)
        api.break_streams(Unavailable("connection reset"))
        api.put(project("d"))  # written while the watch is down: replayed on resume
        await until(lambda: informer.get("d") is not None)

    assert api.lists == 1
    assert api.watch_versions == ["1", "3"]


@pytest.mark.parametrize("compact", [False, True], ids=["decoded", "compact"])
async def test_an_expired_version_relists_and_delivers_missed_deletions(compact: bool) -> None:
    api = FakeProjects()
    for name in ("a", "b", "c"):
        api.put(project(name))
    informer = informer_of(api, compact=compact, watch_options=WatchOptions(backoff=FAST))
    deleted: list[str] = []
    updated: list[str] = []
    informer.add_event_handler(
        on_delete=lambda o: deleted.append(o.metadata.name), on_update=lambda o, n: updated.append(n.metadata.name)
    )
    async with running(informer.run()):
        await informer.wait_synced()
        api.down = True  # the server is unreachable: the watch breaks and cannot restart
        api.break_streams(Unavailable("connection reset"))
        api.remove("a")
        api.put(project("b", labels={"changed": "yes"}))
        api.compact()  # history before now is gone: the old version has expired
        api.down = False
        await until(lambda: deleted == ["a"] and updated == ["b"])

    assert api.lists == 2
    assert informer.cache.keys() == ["b", "c"]
    changed = informer.get("b")
    assert changed is not None and changed.metadata.labels["changed"] == "yes"


async def test_a_silent_watch_is_restarted_from_the_last_bookmark() -> None:
    clock = FakeClock()
    api = FakeProjects()
    api.put(project("a"))
    # The detector (on in tests) would add its periodic check as a second sleeper on the fake clock.
    informer = informer_of(
        api,
        clock=clock,
        watch_options=WatchOptions(idle_timeout=60.0, backoff=Backoff(initial=1.0, jitter=0.0)),
        detect_mutations=False,
    )
    async with running(informer.run()):
        await informer.wait_synced()
        await until(lambda: clock.sleepers == 1)  # the watchdog
        api.put(project("b"))  # an event at version 2 ...
        api.revision += 5
        api.bookmark()  # ... and a bookmark at version 7 keep the watch alive
        await until(lambda: informer.reflector.resource_version == "7")
        clock.advance(59.0)
        await asyncio.sleep(0.01)
        assert api.watch_versions == ["1"]
        clock.advance(1.0)  # 60 s since the bookmark: presumed dead
        await until(lambda: clock.sleepers == 1 and not api.streams)  # now backing off
        clock.advance(1.0)
        await until(lambda: len(api.watch_versions) == 2)

    assert api.watch_versions == ["1", "7"]
    assert api.lists == 1


async def test_a_failing_first_list_is_retried_until_it_succeeds() -> None:
    api = FakeProjects()
    api.put(project("a"))
    api.down = True
    informer = informer_of(api, watch_options=WatchOptions(backoff=FAST))
    async with running(informer.run()):
        await asyncio.sleep(0.05)
        assert not informer.has_synced() and api.lists == 0
        api.down = False
        await asyncio.wait_for(informer.wait_synced(), 2)
    assert informer.cache.keys() == ["a"]
