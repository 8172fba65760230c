"""The one resumable watch (caravanserai.client.resumable) and what the CLI adds to it (cli/watching.py), against
the in-memory API of test_informer_cache. The reflector's use of it is tested there."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

import pytest
from test_informer_cache import FakeProjects, until

from caravanserai import v1
from caravanserai.backoff import Backoff
from caravanserai.cli.watching import Selection, SelectionWatch
from caravanserai.client import Change
from caravanserai.client.resumable import Listed, ResumableWatch, WatchOptions, relist_changes
from caravanserai.errors import Forbidden, Unavailable
from caravanserai.testing.builders import project
from caravanserai.testing.clock import FakeClock

FAST = Backoff(initial=0.001, cap=0.01, jitter=0.0)


def test_relist_changes_add_modify_and_delete_against_what_was_known() -> None:
    a, b, c = project("a"), project("b"), project("c")
    for obj, version in ((a, "1"), (b, "2"), (c, "3")):
        obj.metadata.resource_version = version
    b2 = project("b")
    b2.metadata.resource_version = "5"
    changes = relist_changes({"a": a, "b": b}, [b2, c])
    assert [(ch.type, ch.object.metadata.name) for ch in changes] == [
        (v1.MODIFIED, "b"),
        (v1.ADDED, "c"),
        (v1.DELETED, "a"),
    ]


async def test_a_recycled_watch_resumes_from_its_version_at_once_without_relisting() -> None:
    clock = FakeClock()
    api = FakeProjects()
    api.put(project("a"))
    watch: ResumableWatch[Any] = ResumableWatch(
        cast(Any, api),
        clock=clock,
        watch_options=WatchOptions(backoff=Backoff(initial=100.0, jitter=0.0), watch_duration=(10.0, 10.0)),
    )
    seen: list[str] = []
    async with contextlib.aclosing(watch.changes()) as changes:
        first = await anext(changes)
        assert isinstance(first, Listed) and [o.metadata.name for o in first.objects] == ["a"]
        nxt = asyncio.ensure_future(anext(changes))
        await until(lambda: clock.sleepers == 1)  # the watchdog
        api.put(project("b"))
        change = await asyncio.wait_for(nxt, 1)
        assert isinstance(change, Change)
        seen.append(change.object.metadata.name)
        nxt = asyncio.ensure_future(anext(changes))
        await until(lambda: clock.sleepers == 1)
        clock.advance(10.0)  # planned lifetime over: a new watch from version 2, no backoff of 100 s
        await until(lambda: len(api.watch_versions) == 2)
        api.put(project("c"))
        change = await asyncio.wait_for(nxt, 1)
        assert isinstance(change, Change)
        seen.append(change.object.metadata.name)
    assert seen == ["b", "c"]
    assert api.watch_versions == ["1", "2"]
    assert (watch.lists, watch.watches) == (1, 2)


async def test_errors_outside_retry_on_reach_the_consumer() -> None:
    api = FakeProjects()
    watch: ResumableWatch[Any] = ResumableWatch(
        cast(Any, api), watch_options=WatchOptions(backoff=FAST), retry_on=(Unavailable,)
    )
    async with contextlib.aclosing(watch.changes()) as changes:
        assert isinstance(await anext(changes), Listed)
        nxt = asyncio.ensure_future(anext(changes))
        await until(lambda: bool(api.streams))
        api.break_streams(Unavailable("blip"))  # retried
        await until(lambda: len(api.watch_versions) == 2 and bool(api.streams))
        api.break_streams(Forbidden("no longer allowed"))
        with pytest.raises(Forbidden):
            await asyncio.wait_for(nxt, 1)


async def test_the_cli_watcher_reports_a_relist_as_changes_of_the_names_it_watches() -> None:
    api = FakeProjects()
    for name in ("a", "b", "other"):
        api.put(project(name))
    async with SelectionWatch(cast(Any, api), Selection(names=frozenset({"a", "b", "c"}))) as watcher:
        assert sorted(o.metadata.name for o in await watcher.list_current()) == ["a", "b"]
        got: list[tuple[str, str]] = []

        async def collect() -> None:
            async for change in watcher.events():
                got.append((change.type, change.object.metadata.name))

        task = asyncio.create_task(collect())
        try:
            await until(lambda: bool(api.streams))
            api.down = True
            api.break_streams(Unavailable("connection reset"))
            api.remove("a")
            api.put(project("b", labels={"changed": "yes"}))
            api.put(project("c"))
            api.put(project("other", labels={"changed": "yes"}))
            api.compact()  # the watcher's version has expired: it must relist
            api.down = False
            await until(lambda: len(got) == 3, timeout=5)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert sorted(got) == [(v1.ADDED, "c"), (v1.DELETED, "a"), (v1.MODIFIED, "b")]
    assert sorted(watcher.known) == ["b", "c"]
    assert api.lists == 2
