"""The object store against a real etcd: CAS writes, consistent paging, gapless watch, compaction, leases."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable

import pytest

from caravanserai.errors import AlreadyExists, Conflict, Expired, Invalid, NotFound, Unavailable
from caravanserai.storage import EtcdClient, Store, StoreEvent
from caravanserai.storage.store import Also, CompanionChanged
from caravanserai.testing import EtcdServer

Seen = tuple[str, str, int]  # (type, name, mod_revision) of an event


class Recorder:
    """Consumes `store.watch` in a task and keeps every event, in arrival order."""

    def __init__(self, store: Store, resource: str, *, start_revision: int) -> None:
        self.events: list[StoreEvent] = []
        self.progress: list[int] = []
        self._task = asyncio.create_task(self._run(store, resource, start_revision))

    async def _run(self, store: Store, resource: str, start_revision: int) -> None:
        async for batch in store.watch(resource, start_revision=start_revision):
            if not batch.events:
                self.progress.append(batch.revision)
            assert all(e.mod_revision <= batch.revision for e in batch.events)
            self.events.extend(batch.events)

    def seen(self) -> list[Seen]:
        return [(e.type, e.name, e.mod_revision) for e in self.events]

    async def wait_for(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not condition():
                if self._task.done():
                    self._task.result()
                    raise AssertionError("watch ended")
                await asyncio.sleep(0.02)

    async def wait_for_revision(self, revision: int, timeout: float = 10.0) -> None:
        await self.wait_for(lambda: bool(self.events) and self.events[-1].mod_revision >= revision, timeout)

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def test_crud(store: Store) -> None:
    rev = await store.create("projects", "web", b"v1")
    obj = await store.get("projects", "web")
    assert (obj.name, obj.value, obj.mod_revision, obj.create_revision) == ("web", b"v1", rev, rev)

    rev2 = await store.update("projects", "web", b"v2", expected_revision=rev)
    assert rev2 > rev
    obj = await store.get("projects", "web")
    assert (obj.value, obj.mod_revision, obj.create_revision) == (b"v2", rev2, rev)

    page = await store.list("projects")
    assert [(o.name, o.value) for o in page.items] == [("web", b"v2")]
    assert page.revision >= rev2 and not page.more

    deleted_at = await store.delete("projects", "web", expected_revision=rev2)
    assert deleted_at > rev2
    with pytest.raises(NotFound):
        await store.get("projects", "web")
    assert (await store.list("projects")).items == []


async def test_create_of_existing_name_is_already_exists(store: Store) -> None:
    await store.create("projects", "web", b"first")
    with pytest.raises(AlreadyExists):
        await store.create("projects", "web", b"second")
    assert (await store.get("projects", "web")).value == b"first"


async def test_stale_or_missing_writes_are_refused(store: Store) -> None:
    rev = await store.create("nodes", "n1", b"a")
    rev2 = await store.update("nodes", "n1", b"b", expected_revision=rev)
    with pytest.raises(Conflict, match=f"the object has been modified \\(expected version {rev}, current {rev2}\\)"):
        await store.update("nodes", "n1", b"stale", expected_revision=rev)
    with pytest.raises(Conflict):
        await store.delete("nodes", "n1", expected_revision=rev)
    assert (await store.get("nodes", "n1")).value == b"b"

    with pytest.raises(NotFound):
        await store.update("nodes", "ghost", b"x", expected_revision=rev)
    with pytest.raises(NotFound):
        await store.delete("nodes", "ghost")
    with pytest.raises(NotFound):
        await store.delete("nodes", "ghost", expected_revision=rev)

    # expected_revision=0: delete whatever is there now.
    await store.delete("nodes", "n1")
    with pytest.raises(NotFound):
        await store.get("nodes", "n1")


async def test_a_compare_only_companion_guards_the_write_and_is_not_written(store: Store) -> None:
    member = await store.create("quotas", "team-b/q", b"lender")
    rev = await store.create("projects", "team-a/p", b"v1")
    guard = Also.unchanged("quotas", "team-b/q", member)
    rev = await store.update("projects", "team-a/p", b"v2", expected_revision=rev, also=[guard])
    assert (await store.get("quotas", "team-b/q")).mod_revision == member  # compared, not rewritten
    moved = await store.update("quotas", "team-b/q", b"lends less", expected_revision=member)
    with pytest.raises(CompanionChanged, match=f"expected version {member}, current {moved}"):
        await store.update("projects", "team-a/p", b"v3", expected_revision=rev, also=[guard])
    with pytest.raises(CompanionChanged):
        await store.create("projects", "team-a/q", b"new", also=[guard])
    assert (await store.get("projects", "team-a/p")).value == b"v2"


async def test_a_quiet_companion_fails_on_any_write_under_its_prefix_after_its_revision(store: Store) -> None:
    outcomes: list[int | None] = []
    first = await store.create("quotas", "team-a/q", b"hard 1")
    await store.create("quotas", "team-ab/q", b"another namespace")  # a longer name is not under "team-a/"
    guard = Also.quiet("quotas", "team-a/", first, settled=outcomes.append)
    landed = await store.create("projects", "team-a/p", b"v1", also=[guard])
    assert outcomes == [landed]
    added = await store.create("quotas", "team-a/r", b"created since")
    with pytest.raises(CompanionChanged, match=f"expected version {first}, current {added}"):
        await store.create("projects", "team-a/p2", b"v1", also=[guard])
    assert outcomes == [landed, None]
    with pytest.raises(AlreadyExists):  # a failure that is not the guard's is reported to `settled` too
        await store.create(
            "projects", "team-a/p", b"again", also=[Also.quiet("quotas", "team-a/", added, settled=outcomes.append)]
        )
    assert outcomes == [landed, None, None]
    await store.delete("quotas", "team-a/r")
    await store.delete("quotas", "team-a/q")  # removals leave an empty range: nothing was written after `added`
    assert await store.create("projects", "team-a/p3", b"v1", also=[Also.quiet("quotas", "team-a/", added)]) > added
    with pytest.raises(NotFound):
        await store.get("projects", "team-a/p2")


async def test_a_companion_expected_absent_is_created_with_the_write(store: Store) -> None:
    rev = await store.create("projects", "p", b"v1", also=[Also("marks", "pool/mark", b"", 0)])
    assert (await store.get("marks", "pool/mark")).mod_revision == rev
    with pytest.raises(CompanionChanged):  # it exists now: expected absent is stale
        await store.create("projects", "q", b"v1", also=[Also("marks", "pool/mark", b"", 0)])


async def test_keys_are_a_name_or_a_namespace_and_a_name(store: Store) -> None:
    bad = [("projects", "a/b/c"), ("projects", ""), ("projects", "/a"), ("projects", "a/"), ("pro/jects", "a")]
    for resource, key in [*bad, ("projects", ".."), ("projects", "ns/..")]:
        with pytest.raises(Invalid):
            await store.create(resource, key, b"x")
    await store.create("projects", "team-a/web", b"1")
    await store.create("projects", "team-b/web", b"2")
    await store.create("projects", "team-ab/web", b"3")
    assert [i.name for i in (await store.list("projects", namespace="team-a")).items] == ["team-a/web"]
    assert [i.name for i in (await store.list("projects")).items] == ["team-a/web", "team-ab/web", "team-b/web"]
    with pytest.raises(Invalid):
        await store.update("projects", "a", b"x", expected_revision=0)


async def test_resources_and_prefixes_are_isolated(store: Store, etcd_client: EtcdClient) -> None:
    await store.create("projects", "a", b"1")
    await store.create("projectsx", "b", b"2")
    other = Store(etcd_client, prefix=f"/other-{uuid.uuid4().hex[:8]}/")
    await other.create("projects", "c", b"3")
    assert [o.name for o in (await store.list("projects")).items] == ["a"]
    assert [o.name for o in (await store.list("projectsx")).items] == ["b"]
    assert [o.name for o in (await other.list("projects")).items] == ["c"]


async def test_concurrent_read_modify_write_loses_no_update(store: Store) -> None:
    await store.create("counters", "c", b"0")
    conflicts = 0

    async def increment() -> None:
        nonlocal conflicts
        while True:
            current = await store.get("counters", "c")
            try:
                await store.update(
                    "counters", "c", b"%d" % (int(current.value) + 1), expected_revision=current.mod_revision
                )
                return
            except Conflict:
                conflicts += 1

    await asyncio.gather(*(increment() for _ in range(50)))
    assert (await store.get("counters", "c")).value == b"50"
    assert conflicts > 0  # the loops did race: the guard, not luck, kept every increment


async def test_paging_reads_one_snapshot_while_writes_happen(store: Store) -> None:
    names = [f"obj-{i:02d}" for i in range(30)]
    revisions = {name: await store.create("projects", name, b"original") for name in names}
    first = await store.list("projects", limit=7)
    assert first.more and len(first.items) == 7
    items, page, writes = list(first.items), first, 0
    while page.more:
        # Between pages: change, delete and add objects, including ones on pages still to come.
        victim = names[len(items) + 1] if len(items) + 1 < len(names) else names[0]
        if writes % 2 == 0:
            await store.update("projects", victim, b"changed", expected_revision=revisions[victim])
        else:
            await store.delete("projects", victim)
        await store.create("projects", f"new-{writes}", b"late")
        writes += 1
        page = await store.list("projects", limit=7, start_after=items[-1].name, revision=first.revision)
        assert page.revision == first.revision
        items.extend(page.items)
    assert writes >= 4
    assert [o.name for o in items] == names
    assert {o.value for o in items} == {b"original"}
    whole = await store.list("projects", revision=first.revision)
    assert whole.items == items
    now = {o.name: o.value for o in (await store.list("projects")).items}
    assert "new-0" in now and b"changed" in now.values()  # the writes did happen, just not in the snapshot


async def test_watch_from_a_list_sees_every_later_change_once_in_order(store: Store) -> None:
    await store.create("projects", "pre", b"0")
    page = await store.list("projects")
    recorder = Recorder(store, "projects", start_revision=page.revision + 1)
    expected: list[Seen] = []

    async def writer(i: int) -> None:
        name = f"w{i}"
        rev = await store.create("projects", name, b"1")
        expected.append(("PUT", name, rev))
        rev = await store.update("projects", name, b"2", expected_revision=rev)
        expected.append(("PUT", name, rev))
        if i % 2:
            expected.append(("DELETE", name, await store.delete("projects", name, expected_revision=rev)))

    await asyncio.gather(*(writer(i) for i in range(10)))
    await store.create("other-resource", "x", b"ignored")
    expected.sort(key=lambda seen: seen[2])
    try:
        await recorder.wait_for_revision(expected[-1][2])
        await asyncio.sleep(0.2)  # anything extra would arrive now
    finally:
        await recorder.stop()
    assert recorder.seen() == expected
    updates = [e for e in recorder.events if e.type == "PUT" and e.value == b"2"]
    assert all(e.prev_value == b"1" for e in updates)
    deletes = [e for e in recorder.events if e.type == "DELETE"]
    assert all(e.prev_value == b"2" and e.create_revision > 0 for e in deletes)


async def test_watch_progress_notifications_carry_the_revision(store: Store) -> None:
    rev = await store.create("projects", "a", b"1")
    recorder = Recorder(store, "projects", start_revision=rev)
    try:
        await recorder.wait_for(lambda: bool(recorder.progress), timeout=8)
    finally:
        await recorder.stop()
    assert recorder.seen() == [("PUT", "a", rev)]
    assert recorder.progress[0] >= rev


async def retry_unavailable(call: Callable[[], object], timeout: float = 15.0) -> None:
    """Retry a read until etcd answers (reads are safe to repeat)."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                await call()  # type: ignore[misc]  # call returns an awaitable, typed object
                return
            except Unavailable:
                await asyncio.sleep(0.1)


async def test_watch_resumes_after_etcd_is_killed_and_restarted() -> None:
    async with EtcdServer() as server, EtcdClient([server.endpoint]) as client:
        store = Store(client)
        recorder = Recorder(store, "projects", start_revision=1)
        expected: list[Seen] = []
        try:
            for i in range(10):
                expected.append(("PUT", f"before-{i}", await store.create("projects", f"before-{i}", b"x")))
            await recorder.wait_for_revision(expected[-1][2])

            server.kill()
            await server.restart()
            await retry_unavailable(store.current_revision)
            # These writes land while the watch is still reconnecting (its backoff is running).
            for i in range(10):
                expected.append(("PUT", f"after-{i}", await store.create("projects", f"after-{i}", b"y")))
            after_0 = (await store.get("projects", "after-0")).mod_revision
            expected.append(("DELETE", "before-0", await store.delete("projects", "before-0")))
            expected.append(
                ("PUT", "after-0", await store.update("projects", "after-0", b"z", expected_revision=after_0))
            )

            await recorder.wait_for_revision(expected[-1][2], timeout=20)
            await asyncio.sleep(0.2)
        finally:
            await recorder.stop()
        assert recorder.seen() == expected


async def test_list_and_watch_at_a_compacted_revision_are_expired(store: Store) -> None:
    old = await store.create("projects", "a", b"1")
    await store.update("projects", "a", b"2", expected_revision=old)
    now = await store.current_revision()
    await store.compact(now)
    await store.compact(now)  # compacting again is not an error
    with pytest.raises(Expired):
        await store.list("projects", revision=old)
    with pytest.raises(Expired):
        async with asyncio.timeout(5):
            async for _ in store.watch("projects", start_revision=old):
                pass
    # The current snapshot and a watch from it still work.
    assert [o.value for o in (await store.list("projects", revision=now)).items] == [b"2"]


async def test_lease_expiry_removes_the_object_even_after_an_update(store: Store) -> None:
    lease = await store.grant_lease(1)
    rev = await store.create("events", "e1", b"1", lease=lease)
    recorder = Recorder(store, "events", start_revision=rev + 1)
    try:
        await store.update("events", "e1", b"2", expected_revision=rev)  # keeps the lease
        await recorder.wait_for(lambda: any(e.type == "DELETE" for e in recorder.events), timeout=10)
    finally:
        await recorder.stop()
    assert [(e.type, e.name) for e in recorder.events] == [("PUT", "e1"), ("DELETE", "e1")]
    with pytest.raises(NotFound):
        await store.get("events", "e1")
