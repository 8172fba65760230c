"""The generic API guarantees, run over a built-in kind (projects) and a custom kind (webfarms.example.com):
CRUD and conflicts, the status split and generation, selectors, watch order, resume and bookmarks, and refusals
naming the field."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from caravanserai import v1
from caravanserai.client import Client, ResourceClient
from caravanserai.errors import Conflict, Invalid, NotFound
from caravanserai.testing.builders import project
from support.customkinds import define_webfarm, webfarm, webfarm_messages


@dataclass(frozen=True)
class KindCase:
    """How to exercise one kind through the generic API."""

    setup: Callable[[Client], Awaitable[Any]]
    resources: Callable[[Client], ResourceClient[Any]]
    make: Callable[[str], Any]
    change_spec: Callable[[Any], None]
    change_status: Callable[[Any], None]
    status_of: Callable[[Any], Any]
    break_spec: Callable[[Any], None]
    broken_path: str


async def _nothing(client: Client) -> None:
    return None


def _bind(p: Any) -> None:
    p.status.phase, p.status.node_ref = v1.SCHEDULED, "n1"


def _bad_port(p: Any) -> None:
    p.spec.services[0].ports.add(container_port=70000)


def _bad_policy(s: Any) -> None:
    s.spec.update_policy = 7  # proto3 enums are open: the client sends it, the server refuses it


CASES = {
    "projects": KindCase(
        setup=_nothing,
        resources=lambda c: c.projects,
        make=lambda name: project(name),
        change_spec=lambda p: setattr(p.spec, "priority", p.spec.priority + 1),
        change_status=_bind,
        status_of=lambda p: (p.status.phase, p.status.node_ref),
        break_spec=_bad_port,
        broken_path="spec.services[0].ports[0].containerPort",
    ),
    "webfarms": KindCase(
        setup=define_webfarm,
        resources=lambda c: c.resource(webfarm_messages().WebFarm),
        make=lambda name: webfarm(name),
        change_spec=lambda s: setattr(s.spec, "replicas", s.spec.replicas + 1),
        change_status=lambda s: setattr(s.status, "ready_replicas", 7),
        status_of=lambda s: s.status.ready_replicas,
        break_spec=_bad_policy,
        broken_path="spec.updatePolicy",
    ),
}


@pytest.fixture(params=sorted(CASES))
async def kind(request: pytest.FixtureRequest, client: Client) -> tuple[KindCase, ResourceClient[Any]]:
    case = CASES[request.param]
    await case.setup(client)
    return case, case.resources(client)


async def test_crud_and_conflicts(kind: tuple[KindCase, ResourceClient[Any]]) -> None:
    case, rc = kind
    created = await rc.create(case.make("one"))
    assert created.metadata.uid and created.metadata.generation == 1
    assert await rc.get("one") == created
    fresh = await rc.get("one")
    case.change_spec(fresh)
    updated = await rc.update(fresh)
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    case.change_spec(created)  # stale
    with pytest.raises(Conflict):
        await rc.update(created)
    assert (await rc.delete("one")).deleted
    with pytest.raises(NotFound):
        await rc.get("one")


async def test_status_split_and_generation(kind: tuple[KindCase, ResourceClient[Any]]) -> None:
    case, rc = kind
    created = await rc.create(case.make("split"))
    before = case.status_of(created)
    case.change_status(created)
    case.change_spec(created)
    updated = await rc.update(created)  # spec only: the status change is ignored
    assert case.status_of(updated) == before and updated.metadata.generation == 2
    case.change_status(updated)
    spec_before = updated.spec.SerializeToString()
    case.change_spec(updated)
    status = await rc.update_status(updated)  # status only: the spec change is ignored
    assert case.status_of(status) != before
    assert status.spec.SerializeToString() == spec_before and status.metadata.generation == 2


async def test_selectors_on_name_and_labels(kind: tuple[KindCase, ResourceClient[Any]]) -> None:
    case, rc = kind
    for name, tier in (("a", "web"), ("b", "db"), ("c", "web")):
        obj = case.make(name)
        obj.metadata.labels["tier"] = tier
        await rc.create(obj)
    assert [o.metadata.name for o in (await rc.list(label_selector="tier=web")).items] == ["a", "c"]
    assert [o.metadata.name for o in (await rc.list(field_selector="metadata.name=b")).items] == ["b"]
    assert [o.metadata.name for o in (await rc.list(field_selector="metadata.name!=b", limit=1)).items] == ["a"]


async def test_watch_order_resume_and_bookmarks(kind: tuple[KindCase, ResourceClient[Any]]) -> None:
    case, rc = kind
    start = (await rc.list()).resource_version
    first = await rc.create(case.make("w"))
    case.change_spec(first)
    second = await rc.update(first)
    await rc.delete("w")
    seen: list[tuple[str, str]] = []
    async for change in rc.watch(resource_version=start):
        if change.type != v1.BOOKMARK:
            seen.append((change.type, change.object.metadata.resource_version))
        if len(seen) == 3:
            break
    assert [t for t, _ in seen] == [v1.ADDED, v1.MODIFIED, v1.DELETED]
    assert [int(v) for _, v in seen] == sorted(int(v) for _, v in seen)
    resumed = [c.type async for c in _first(rc.watch(resource_version=second.metadata.resource_version), 1)]
    assert resumed == [v1.DELETED]
    bookmarks = [c async for c in _first(rc.watch(resource_version=seen[-1][1], allow_bookmarks=True), 1)]
    assert bookmarks[0].type == v1.BOOKMARK and int(bookmarks[0].object.metadata.resource_version) >= int(seen[-1][1])


async def _first(changes: Any, n: int) -> Any:
    got = 0
    async with asyncio.timeout(10):
        async for change in changes:
            yield change
            got += 1
            if got == n:
                return


async def test_bad_input_names_the_field(kind: tuple[KindCase, ResourceClient[Any]]) -> None:
    case, rc = kind
    bad = case.make("bad")
    case.break_spec(bad)
    with pytest.raises(Invalid) as info:
        await rc.create(bad)
    assert [v.field for v in info.value.violations] == [case.broken_path]
    unnamed = case.make("")
    with pytest.raises(Invalid) as info:
        await rc.create(unnamed)
    assert [v.field for v in info.value.violations] == ["metadata.name"]
