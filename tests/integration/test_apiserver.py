"""The resource API against a real etcd and a real apiserver: CRUD, concurrency, lifecycle, selectors, watches."""

from __future__ import annotations

import asyncio

import pytest

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import AlreadyExists, Conflict, Expired, FailedPrecondition, Invalid, NotFound, Unavailable
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import lease, node, project


async def test_crud_round_trip_for_every_kind(client: Client) -> None:
    p = await client.projects.create(project("web", services=["app", "db"]))
    assert p.metadata.uid and p.metadata.generation == 1 and p.metadata.resource_version
    assert p.status.phase == v1.PENDING
    phase = meta.get_condition(p.status.conditions, v1.CONDITION_PHASE)
    assert phase is not None and phase.reason == "Created" and phase.HasField("last_transition_time")
    got = await client.projects.get("web")
    assert got == p

    n = await client.nodes.create(node("n1", labels={"zone": "a"}))
    assert n.status.state == v1.NODE_NOT_READY
    held = await client.leases.create(lease("n1"))
    assert held.spec.holder_identity == "n1"
    ev = v1.Event()
    ev.metadata.name = "web.1"
    ev.spec.involved_object.kind = "Project"
    ev.spec.involved_object.name = "web"
    ev.spec.type = "Normal"
    ev.spec.reason = "Tested"
    created_event = await client.events.create(ev)
    assert created_event.kind == "Event"

    for rc, name in ((client.projects, "web"), (client.nodes, "n1"), (client.leases, "n1"), (client.events, "web.1")):
        listed = await rc.list()
        assert [o.metadata.name for o in listed.items] == [name]
        obj = await rc.get(name)
        obj.metadata.labels["touched"] = "yes"
        updated = await rc.update(obj)
        assert updated.metadata.labels["touched"] == "yes"
        assert int(updated.metadata.resource_version) > int(obj.metadata.resource_version)

    await client.projects.delete("web")  # Pending: removed at once
    with pytest.raises(NotFound):
        await client.projects.get("web")


async def test_create_existing_name_and_client_set_fields_are_refused(client: Client) -> None:
    await client.projects.create(project("dup"))
    with pytest.raises(AlreadyExists):
        await client.projects.create(project("dup"))
    bad = project("with-status")
    bad.status.phase = v1.RUNNING
    with pytest.raises(Invalid) as info:
        await client.projects.create(bad)
    assert [v.field for v in info.value.violations] == ["status"]


async def test_invalid_project_names_every_field(client: Client) -> None:
    bad = project("Bad_Name", services=["a", "a"])
    bad.spec.services[0].image = ""
    with pytest.raises(Invalid) as info:
        await client.projects.create(bad)
    fields = {v.field for v in info.value.violations}
    assert "metadata.name" in fields
    assert "spec.services[0].image" in fields
    assert any(f.startswith("spec.services[1].name") for f in fields)
    with pytest.raises(NotFound):
        await client.projects.get("Bad_Name")


async def test_stale_update_is_a_conflict_and_generation_follows_spec(client: Client) -> None:
    p = await client.projects.create(project("gen"))
    p.metadata.labels["a"] = "b"
    p2 = await client.projects.update(p)
    assert p2.metadata.generation == 1  # metadata only
    p2.spec.services[0].image = "busybox:other"
    p3 = await client.projects.update(p2)
    assert p3.metadata.generation == 2
    p.spec.services[0].image = "stale"
    with pytest.raises(Conflict):
        await client.projects.update(p)  # p carries the first version
    same = await client.projects.update(p3)  # no change: no write
    assert same.metadata.resource_version == p3.metadata.resource_version


async def test_update_ignores_status_and_update_status_ignores_spec(client: Client) -> None:
    p = await client.projects.create(project("split"))
    p.status.phase = v1.RUNNING
    p.spec.priority = 5
    p2 = await client.projects.update(p)
    assert p2.status.phase == v1.PENDING and p2.spec.priority == 5
    p2.spec.priority = 9
    p2.status.phase = v1.SCHEDULED
    p2.status.node_ref = "n1"
    p3 = await client.projects.update_status(p2)
    assert p3.status.phase == v1.SCHEDULED and p3.spec.priority == 5
    phase = meta.get_condition(p3.status.conditions, v1.CONDITION_PHASE)
    assert phase is not None and phase.message == "Phase changed from Pending to Scheduled"


async def test_fifty_concurrent_read_modify_write_loops_lose_nothing(client: Client) -> None:
    await client.projects.create(project("counter"))

    async def increment() -> None:
        while True:
            p = await client.projects.get("counter")
            p.metadata.annotations["count"] = str(int(p.metadata.annotations.get("count", "0")) + 1)
            try:
                await client.projects.update(p)
                return
            except Conflict:
                continue

    await asyncio.gather(*(increment() for _ in range(50)))
    final = await client.projects.get("counter")
    assert final.metadata.annotations["count"] == "50"


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ([v1.SCHEDULED, v1.RUNNING, v1.FAILED], True),
        ([v1.SCHEDULED, v1.PENDING], True),
        ([v1.RUNNING], False),
        ([v1.FAILED], False),
        ([v1.TERMINATED], False),
        ([v1.TERMINATING], False),
        ([v1.SCHEDULED, v1.RUNNING, v1.SCHEDULED], False),
        ([v1.SCHEDULED, v1.FAILED, v1.RUNNING], False),
    ],
)
async def test_phase_transition_table(client: Client, path: list[str], allowed: bool) -> None:
    p = await client.projects.create(project("phases"))
    try:
        for i, phase in enumerate(path):
            p.status.phase = phase
            p.status.node_ref = "" if phase == v1.PENDING else "n1"
            if not allowed and i == len(path) - 1:
                with pytest.raises(FailedPrecondition):
                    await client.projects.update_status(p)
                return
            p = await client.projects.update_status(p)
            assert p.status.phase == phase
    finally:
        await client.projects.delete("phases", force=True)


async def test_delete_of_active_project_goes_through_terminating(client: Client) -> None:
    p = await client.projects.create(project("active"))
    p.status.phase, p.status.node_ref = v1.SCHEDULED, "n1"
    p = await client.projects.update_status(p)
    p.status.phase = v1.RUNNING
    await client.projects.update_status(p)
    response = await client.projects.delete("active")
    assert not response.deleted
    marked = await client.projects.get("active")
    assert marked.status.phase == v1.TERMINATING and marked.metadata.HasField("deletion_timestamp")
    assert meta.get_condition(marked.status.conditions, v1.CONDITION_PHASE).reason == "DeletionRequested"
    late = meta.copy(marked)
    late.status.phase = v1.RUNNING  # an agent's late Running never overwrites Terminating
    with pytest.raises(FailedPrecondition):
        await client.projects.update_status(late)
    marked.status.phase = v1.TERMINATED
    await client.projects.update_status(marked)
    await client.projects.delete("active")
    with pytest.raises(NotFound):
        await client.projects.get("active")


def lose_answers(api: RunningApiServer, method: str, times: int) -> list[str]:
    """Make the apiserver's store carry out its next `times` calls of `method` and then raise Unavailable, as
    when the etcd member went away before answering; the keys of the calls whose answer was lost."""
    service = api.server.service
    assert service is not None
    store = service._store  # noqa: SLF001 - the one store every strategy writes through
    real = getattr(store, method)
    lost: list[str] = []

    async def carried_out_then_lost(resource: str, key: str, *args: object, **kwargs: object) -> int:
        revision: int = await real(resource, key, *args, **kwargs)
        if len(lost) < times:
            lost.append(key)
            raise Unavailable("etcd unavailable: No status received")
        return revision

    setattr(store, method, carried_out_then_lost)
    return lost


async def test_a_delete_whose_answer_etcd_lost_is_read_again(client: Client, api: RunningApiServer) -> None:
    await client.projects.create(project("pending"))  # removed at once
    active = await client.projects.create(project("active"))  # marked Terminating
    active.status.phase, active.status.node_ref = v1.SCHEDULED, "n1"
    await client.projects.update_status(active)
    with_version = await client.projects.create(project("versioned"))

    lost = lose_answers(api, "delete", 1)
    response = await client.projects.delete("pending")
    assert lost == ["default/pending"] and response.deleted and meta.unwrap(response.object).metadata.name == "pending"
    with pytest.raises(NotFound):
        await client.projects.get("pending")

    lost = lose_answers(api, "update", 1)
    response = await client.projects.delete("active")
    assert lost == ["default/active"] and not response.deleted
    assert (await client.projects.get("active")).status.phase == v1.TERMINATING

    lost = lose_answers(api, "delete", 1)  # with a version the server does not guess (the client may repeat it)
    service = api.server.service
    assert service is not None
    request = v1.DeleteRequest(resource="projects", namespace="default", name="versioned")
    request.resource_version = with_version.metadata.resource_version
    with pytest.raises(Unavailable):
        await service.delete(request)
    assert lost == ["default/versioned"]


async def test_node_with_bound_projects_cannot_be_deleted(client: Client) -> None:
    for i in range(10):  # the check must see a binding acknowledged a moment ago
        await client.nodes.create(node(f"busy{i}"))
        p = await client.projects.create(project(f"bound{i}"))
        p.status.phase, p.status.node_ref = v1.SCHEDULED, f"busy{i}"
        await client.projects.update_status(p)
        with pytest.raises(FailedPrecondition, match="still has 1 project"):
            await client.nodes.delete(f"busy{i}")
    response = await client.nodes.delete("busy0", force=True)
    assert response.deleted


async def test_selectors_filter_list(client: Client) -> None:
    for name, tier in (("a", "web"), ("b", "db"), ("c", "web")):
        await client.projects.create(project(name, labels={"tier": tier}))
    b = await client.projects.get("b")
    b.status.phase, b.status.node_ref = v1.SCHEDULED, "n2"
    await client.projects.update_status(b)
    names = lambda lst: sorted(o.metadata.name for o in lst.items)  # noqa: E731
    assert names(await client.projects.list(label_selector="tier=web")) == ["a", "c"]
    assert names(await client.projects.list(label_selector="tier in (db),tier!=web")) == ["b"]
    assert names(await client.projects.list(field_selector="status.phase=Pending")) == ["a", "c"]
    assert names(await client.projects.list(field_selector="status.nodeRef=n2")) == ["b"]
    assert names(await client.projects.list(field_selector="metadata.name!=a", label_selector="tier=web")) == ["c"]
    with pytest.raises(Invalid):
        await client.projects.list(field_selector="spec.priority=1")


async def test_pagination_reads_one_snapshot(client: Client) -> None:
    for i in range(7):
        await client.projects.create(project(f"p{i}"))
    first = await client.projects.list(limit=3)
    assert len(first.items) == 3 and first.continue_token
    await client.projects.create(project("p9-late"))
    seen = [o.metadata.name for o in first.items]
    token = first.continue_token
    while token:
        page = await client.projects.list(limit=3, continue_token=token)
        assert page.resource_version == first.resource_version
        seen.extend(o.metadata.name for o in page.items)
        token = page.continue_token
    assert seen == [f"p{i}" for i in range(7)]


async def test_watch_from_list_version_sees_every_change_once_in_order(client: Client) -> None:
    start = await client.projects.list()
    events: list[tuple[str, str, str]] = []

    async def consume() -> None:
        async for ev in client.projects.watch(resource_version=start.resource_version, allow_bookmarks=False):
            events.append((ev.type, ev.object.metadata.name, ev.object.metadata.resource_version))
            if len(events) == 30:
                return

    task = asyncio.create_task(consume())
    expected_versions = []
    for i in range(10):
        p = await client.projects.create(project(f"w{i}"))
        p.metadata.labels["x"] = "1"
        p = await client.projects.update(p)
        d = await client.projects.delete(f"w{i}")
        expected_versions.extend([None, p.metadata.resource_version, None])
        assert d.deleted
    await asyncio.wait_for(task, 10)
    assert [e[0] for e in events] == [v1.ADDED, v1.MODIFIED, v1.DELETED] * 10
    assert [e[1] for e in events] == [f"w{i}" for i in range(10) for _ in range(3)]
    versions = [int(e[2]) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == 30


async def test_watch_selection_changes_are_added_and_deleted(client: Client) -> None:
    start = await client.projects.list()
    seen: list[tuple[str, str]] = []

    async def consume() -> None:
        async for ev in client.projects.watch(
            resource_version=start.resource_version, field_selector="status.nodeRef=n7", allow_bookmarks=False
        ):
            seen.append((ev.type, ev.object.status.phase))
            if len(seen) == 2:
                return

    task = asyncio.create_task(consume())
    p = await client.projects.create(project("moving"))
    p.status.phase, p.status.node_ref = v1.SCHEDULED, "n7"
    p = await client.projects.update_status(p)
    p.status.phase, p.status.node_ref = v1.PENDING, ""
    await client.projects.update_status(p)
    await asyncio.wait_for(task, 10)
    assert seen == [(v1.ADDED, v1.SCHEDULED), (v1.DELETED, v1.PENDING)]


async def test_watchers_filed_by_node_see_only_their_node_and_are_not_checked_for_others(
    client: Client, api: RunningApiServer
) -> None:
    cache = api.server.service.cache("projects")  # type: ignore[union-attr]  # the server is started: service is set
    start = (await client.projects.list()).resource_version
    checked: dict[str, list[str]] = {"n1": [], "n2": []}

    def on(node: str):  # type: ignore[no-untyped-def]  # returns an untyped predicate for the watch cache
        def predicate(obj) -> bool:  # type: ignore[no-untyped-def]  # obj is any cached object (the cache's Predicate takes Any)
            checked[node].append(obj.metadata.name)
            return bool(obj.status.node_ref == node)

        return predicate

    filed = {n: cache.watch(on(n), resource_version=start, index=("status.nodeRef", n)) for n in checked}
    seen: dict[str, list[tuple[str, str]]] = {"n1": [], "n2": [], "all": []}

    async def consume(key: str, selector: str, count: int) -> None:
        async for ev in client.projects.watch(resource_version=start, field_selector=selector, allow_bookmarks=False):
            seen[key].append((ev.type, ev.object.metadata.name))
            if len(seen[key]) == count:
                return

    tasks = [
        asyncio.create_task(consume("n1", "status.nodeRef=n1", 2)),
        asyncio.create_task(consume("n2", "status.nodeRef=n2,status.phase=Scheduled", 1)),
        asyncio.create_task(consume("all", "", 5)),
    ]
    for name, node_name in (("on-1", "n1"), ("on-2", "n2")):
        p = await client.projects.create(project(name))
        p.status.phase, p.status.node_ref = v1.SCHEDULED, node_name
        await client.projects.update_status(p)
    moved = await client.projects.get("on-1")
    moved.status.node_ref = ""
    moved.status.phase = v1.PENDING
    await client.projects.update_status(moved)
    await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert seen["n1"] == [(v1.ADDED, "on-1"), (v1.DELETED, "on-1")]
    assert seen["n2"] == [(v1.ADDED, "on-2")]
    assert [name for _, name in seen["all"]] == ["on-1", "on-1", "on-2", "on-2", "on-1"]
    # A filed watcher is asked only about changes whose object has (or had) its node.
    assert set(checked["n1"]) == {"on-1"} and set(checked["n2"]) == {"on-2"}
    assert len(filed["n1"]._pending) == 2 and len(filed["n2"]._pending) == 1  # noqa: SLF001
    for watcher in filed.values():
        watcher.close("test done")
    for node_name, watcher in filed.items():  # closed: unfiled (the gRPC watches end on their own time)
        assert watcher not in cache._watchers.indexed.get(("status.nodeRef", node_name), set())  # noqa: SLF001


async def test_watch_sends_bookmarks(client: Client) -> None:
    start = await client.projects.list()
    async for ev in client.projects.watch(resource_version=start.resource_version, allow_bookmarks=True):
        assert ev.type == v1.BOOKMARK
        assert int(ev.object.metadata.resource_version) >= int(start.resource_version)
        break


async def test_watch_from_compacted_version_is_expired(etcd, client: Client, api: RunningApiServer) -> None:  # type: ignore[no-untyped-def]  # the etcd fixture is left unannotated
    from caravanserai.testing.apiserver import start_apiserver

    first = await client.projects.create(project("old"))
    for i in range(5):
        first.metadata.annotations["i"] = str(i)
        first = await client.projects.update(first)
    store = api.server.service._store  # type: ignore[union-attr]  # the server is started: service is set  # noqa: SLF001
    await store.compact(await store.current_revision())
    # A new apiserver cannot replay history from before the compaction: older versions are Expired.
    fresh = await start_apiserver(etcd.endpoint, prefix=api.prefix)
    try:
        async with Client(fresh.address) as c2:
            with pytest.raises(Expired):
                async for _ in c2.projects.watch(resource_version="1"):
                    pass
            with pytest.raises(Expired):
                await c2.projects.list(limit=1, continue_token=_token(1, "a"))
    finally:
        await fresh.stop()


def _token(revision: int, after: str) -> str:
    import base64
    import json

    return base64.urlsafe_b64encode(json.dumps({"rv": revision, "after": after}).encode()).decode()


async def test_watch_resumes_across_apiserver_restart(etcd, client: Client, api: RunningApiServer) -> None:  # type: ignore[no-untyped-def]  # the etcd fixture is left unannotated
    from caravanserai.testing.apiserver import start_apiserver

    p = await client.projects.create(project("resume"))
    version = p.metadata.resource_version
    await api.stop()
    # Changes while no apiserver runs are written by a second apiserver on the same prefix.
    other = await start_apiserver(etcd.endpoint, prefix=api.prefix)
    try:
        async with Client(other.address) as c2:
            p.metadata.labels["after"] = "restart"
            await c2.projects.update(p)
            events = []
            async for ev in c2.projects.watch(resource_version=version, allow_bookmarks=False):
                events.append((ev.type, ev.object.metadata.labels.get("after")))
                break
            assert events == [(v1.MODIFIED, "restart")]
    finally:
        await other.stop()


async def test_events_are_stored_with_a_lease(client: Client, api: RunningApiServer) -> None:
    ev = v1.Event()
    ev.metadata.name = "leased"
    ev.spec.involved_object.kind = "Node"
    ev.spec.involved_object.name = "n1"
    ev.spec.type = "Warning"
    ev.spec.reason = "Tested"
    await client.events.create(ev)
    leases = api.server.service._event_leases  # type: ignore[union-attr]  # the server is started: service is set
    assert leases._lease != 0  # noqa: SLF001


async def test_a_watcher_that_cannot_keep_up_is_closed_and_others_are_not(
    client: Client, api: RunningApiServer
) -> None:
    from caravanserai.apiserver.watchcache import WatcherClosed

    cache = api.server.service.cache("projects")  # type: ignore[union-attr]  # the server is started: service is set
    slow = cache.watch(lambda obj: True, resource_version="", max_pending=5)
    healthy = cache.watch(lambda obj: True, resource_version="")
    for i in range(10):
        await client.projects.create(project(f"s{i}"))

    async def healthy_saw_all() -> bool:
        return len(healthy._pending) == 10  # noqa: SLF001

    from caravanserai.testing.wait import wait_for

    await wait_for(healthy_saw_all, 5)
    drained = 0
    with pytest.raises(WatcherClosed, match="too slow"):
        while True:
            await slow.next(timeout=1)
            drained += 1
    assert drained == 5  # what was queued before it fell behind is still delivered, then it ends
    healthy.close("test done")
