"""Writes racing other writers, against a real etcd and apiserver: without a caller precondition the server
retries its own read-modify-write; only a caller-given resource_version yields Conflict, in one wording."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.errors import Conflict, NotFound
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import project

WORDING = r"the object has been modified \(expected version \d+, current \d+\); please apply your changes"


async def _touch(client: Client, name: str, value: str) -> None:
    """One write by another writer: a label change with the version it read."""
    current = await client.projects.get(name)
    current.metadata.labels["touched"] = value
    await client.projects.update(current)


def _interleave(
    api: RunningApiServer, client: Client, name: str, monkeypatch: pytest.MonkeyPatch, verb: str
) -> list[int]:
    """Make the apiserver's next store `verb` (delete or update) lose the race: just before its compare-and-swap,
    another writer changes the object through the API. Returns a list counting the writes slipped in."""
    assert api.server.service is not None
    store = api.server.service._store
    original: Callable[..., Awaitable[int]] = getattr(store, verb)
    slipped: list[int] = []

    async def racing(resource: str, obj_name: str, *args: Any, **kwargs: Any) -> int:
        if resource == "projects" and obj_name == f"default/{name}" and not slipped:  # the store speaks keys
            slipped.append(1)
            await _touch(client, name, "by-the-other-writer")
        return await original(resource, obj_name, *args, **kwargs)

    monkeypatch.setattr(store, verb, racing)
    return slipped


async def _running(client: Client, name: str) -> v1.Project:
    created = await client.projects.create(project(name))
    created.status.phase = v1.SCHEDULED
    created.status.node_ref = "n1"
    scheduled = await client.projects.update_status(created)
    scheduled.status.phase = v1.RUNNING
    return await client.projects.update_status(scheduled)


async def test_delete_without_version_is_retried_by_the_server(
    api: RunningApiServer, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    await client.projects.create(project("pending-one"))
    slipped = _interleave(api, client, "pending-one", monkeypatch, "delete")
    response = await client.projects.delete("pending-one")
    assert slipped == [1] and response.deleted
    with pytest.raises(NotFound):
        await client.projects.get("pending-one")


async def test_marking_delete_without_version_is_retried_by_the_server(
    api: RunningApiServer, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _running(client, "running-one")
    slipped = _interleave(api, client, "running-one", monkeypatch, "update")
    response = await client.projects.delete("running-one")
    assert slipped == [1] and not response.deleted
    stored = await client.projects.get("running-one")
    assert stored.status.phase == v1.TERMINATING and stored.metadata.labels["touched"] == "by-the-other-writer"


async def test_delete_with_callers_version_is_conflict_in_one_wording(
    api: RunningApiServer, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = await client.projects.create(project("guarded"))
    _interleave(api, client, "guarded", monkeypatch, "delete")
    with pytest.raises(Conflict, match=f"^Project default/guarded: {WORDING}"):
        await client.projects.delete("guarded", resource_version=created.metadata.resource_version)
    assert (await client.projects.get("guarded")).metadata.labels["touched"] == "by-the-other-writer"
    # A stale version caught before the compare-and-swap reads the same.
    with pytest.raises(Conflict, match=f"^Project default/guarded: {WORDING}"):
        await client.projects.delete("guarded", resource_version=created.metadata.resource_version)
    stale = await client.projects.get("guarded")
    await _touch(client, "guarded", "again")
    stale.metadata.labels["mine"] = "x"
    with pytest.raises(Conflict, match=f"^Project default/guarded: {WORDING}"):
        await client.projects.update(stale)


async def test_plain_deletes_never_conflict_with_a_busy_writer(client: Client) -> None:
    """The race as users meet it: a controller keeps writing projects while they are deleted."""
    rounds = 40
    names = [f"busy-{i}" for i in range(rounds)]
    for name in names:
        await _running(client, name)
    stop = asyncio.Event()

    async def writer(offset: int) -> None:
        count = 0
        while not stop.is_set():
            for name in names[offset::2]:
                count += 1
                with contextlib.suppress(Conflict, NotFound):
                    await _touch(client, name, str(count))

    writers = [asyncio.create_task(writer(i)) for i in range(2)]
    try:
        for name in names:
            await client.projects.delete(name)  # never Conflict
    finally:
        stop.set()
        await asyncio.gather(*writers)
    for name in names:
        assert (await client.projects.get(name)).status.phase == v1.TERMINATING
