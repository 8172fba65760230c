"""The in-memory FakeClient keeps the apiserver's generic rules: versions, Conflict, NotFound, AlreadyExists,
watch events, the status subresource, finalizers with deletionTimestamp, owner references."""

from __future__ import annotations

import asyncio

import pytest

from caravanserai import meta, v1
from caravanserai.client import Change
from caravanserai.errors import AlreadyExists, Conflict, Invalid, NotFound
from caravanserai.testing import FakeClient, FakeClock, builders


def config(name: str, **labels: str) -> v1.Config:
    obj = meta.with_type_meta(v1.Config())
    obj.metadata.name = name
    obj.metadata.labels.update(labels)
    return obj


async def test_create_sets_identity_and_refuses_a_taken_name(fake_client: FakeClient, fake_clock: FakeClock) -> None:
    stored = await fake_client.configs.create(config("a"))
    assert stored.metadata.uid and stored.metadata.generation == 1 and stored.kind == "Config"
    assert stored.metadata.resource_version == "1"
    assert stored.metadata.creation_timestamp.seconds == int(fake_clock.now())
    with pytest.raises(AlreadyExists):
        await fake_client.configs.create(config("a"))
    with pytest.raises(Invalid, match=r"metadata\.resourceVersion"):
        await fake_client.configs.create(stored)


async def test_update_is_compare_and_swap_and_bumps_generation_on_spec_changes(fake_client: FakeClient) -> None:
    projects = fake_client.projects
    stored = await projects.create(builders.project("web"))
    relabelled = meta.copy(stored)
    relabelled.metadata.labels["team"] = "a"
    second = await projects.update(relabelled)
    assert second.metadata.generation == 1 and int(second.metadata.resource_version) > 1
    with pytest.raises(Conflict, match="Project default/web: the object has been modified"):
        await projects.update(relabelled)  # stale version
    changed = meta.copy(second)
    changed.spec.services[0].image = "busybox:2"
    third = await projects.update(changed)
    assert third.metadata.generation == 2
    assert await projects.update(third) == third  # nothing changed: same version
    with pytest.raises(Invalid, match=r"metadata\.resourceVersion"):
        await projects.update(builders.project("web"))
    with pytest.raises(NotFound):
        await projects.get("nope")


async def test_status_goes_only_through_the_status_subresource(fake_client: FakeClient) -> None:
    projects = fake_client.projects
    stored = await projects.create(builders.project("web"))
    with_status = meta.copy(stored)
    with_status.status.phase = "Running"
    with_status.metadata.labels["ignored"] = "yes"
    written = await projects.update_status(with_status)
    assert written.status.phase == "Running" and "ignored" not in written.metadata.labels
    spec_write = meta.copy(written)
    spec_write.status.phase = "Failed"
    spec_write.metadata.labels["team"] = "a"
    after = await projects.update(spec_write)
    assert after.status.phase == "Running" and after.metadata.labels["team"] == "a"


async def test_finalizers_hold_a_deleted_object_until_emptied(fake_client: FakeClient) -> None:
    configs = fake_client.configs
    obj = config("a")
    obj.metadata.finalizers.append("example.com/cleanup")
    await configs.create(obj)
    response = await configs.delete("a")
    assert not response.deleted
    marked = await configs.get("a")
    assert marked.metadata.HasField("deletion_timestamp")
    marked.metadata.finalizers.remove("example.com/cleanup")
    await configs.update(marked)
    with pytest.raises(NotFound):
        await configs.get("a")


async def test_delete_with_a_stale_version_conflicts(fake_client: FakeClient) -> None:
    stored = await fake_client.configs.create(config("a"))
    await fake_client.configs.update(meta.copy(stored))  # unchanged: same version
    relabelled = meta.copy(stored)
    relabelled.metadata.labels["x"] = "y"
    await fake_client.configs.update(relabelled)
    with pytest.raises(Conflict):
        await fake_client.configs.delete("a", resource_version=stored.metadata.resource_version)
    assert (await fake_client.configs.delete("a")).deleted


async def test_dependents_go_with_their_owner(fake_client: FakeClient) -> None:
    owner = await fake_client.configs.create(config("owner"))
    child = config("child")
    meta.set_owner(child, owner, controller=True)
    await fake_client.configs.create(child)
    await fake_client.configs.create(config("other"))
    await fake_client.configs.delete("owner")
    names = [c.metadata.name for c in await fake_client.configs.list()]
    assert names == ["other"]


async def test_list_selects_by_label_and_pages(fake_client: FakeClient) -> None:
    for name, team in (("a", "x"), ("b", "y"), ("c", "x")):
        await fake_client.configs.create(config(name, team=team))
    assert [c.metadata.name for c in await fake_client.configs.list(label_selector="team=x")] == ["a", "c"]
    first = await fake_client.configs.list(limit=2)
    rest = await fake_client.configs.list(limit=2, continue_token=first.continue_token)
    assert [c.metadata.name for c in [*first, *rest]] == ["a", "b", "c"] and not rest.continue_token


async def test_watch_replays_from_a_version_and_follows(fake_client: FakeClient) -> None:
    configs = fake_client.configs
    first = await configs.create(config("a"))
    seen: list[Change[v1.Config]] = []

    async def follow() -> None:
        async for change in configs.watch(resource_version=first.metadata.resource_version):
            seen.append(change)
            if change.type == "DELETED":
                return

    watcher = asyncio.create_task(follow())
    await configs.create(config("b"))
    await fake_client.nodes.create(builders.node("n1"))  # another kind: not seen
    await configs.delete("a")
    await asyncio.wait_for(watcher, 5)
    assert [(c.type, c.object.metadata.name) for c in seen] == [("ADDED", "b"), ("DELETED", "a")]


async def test_watch_from_zero_lists_first(fake_client: FakeClient) -> None:
    await fake_client.configs.create(config("a"))
    stream = fake_client.configs.watch(resource_version="0")
    change = await anext(stream)
    await stream.aclose()
    assert (change.type, change.object.metadata.name) == ("ADDED", "a")


async def owned_pair(fake_client: FakeClient, *, held: bool = False) -> None:
    owner = await fake_client.configs.create(config("owner"))
    child = config("child")
    if held:
        child.metadata.finalizers.append("example.com/hold")
    meta.set_owner(child, owner, controller=True, block_owner_deletion=True)
    await fake_client.configs.create(child)


async def test_orphan_keeps_dependents_without_the_reference(fake_client: FakeClient) -> None:
    await owned_pair(fake_client)
    await fake_client.configs.delete("owner", propagation_policy=meta.PROPAGATION_ORPHAN)
    child = await fake_client.configs.get("child")
    assert list(child.metadata.owner_references) == []
    with pytest.raises(NotFound):
        await fake_client.configs.get("owner")


async def test_foreground_waits_for_blocking_dependents(fake_client: FakeClient) -> None:
    await owned_pair(fake_client, held=True)
    response = await fake_client.configs.delete("owner", propagation_policy=meta.PROPAGATION_FOREGROUND)
    assert not response.deleted
    owner = await fake_client.configs.get("owner")
    assert meta.FINALIZER_FOREGROUND in owner.metadata.finalizers and owner.metadata.HasField("deletion_timestamp")
    child = await fake_client.configs.get("child")
    assert child.metadata.HasField("deletion_timestamp")
    child.metadata.finalizers.remove("example.com/hold")
    await fake_client.configs.update(child)  # the last blocking dependent goes: so does the owner
    assert [c.metadata.name for c in await fake_client.configs.list()] == []


async def test_an_unknown_propagation_policy_is_refused(fake_client: FakeClient) -> None:
    await fake_client.configs.create(config("a"))
    with pytest.raises(Invalid, match="propagationPolicy"):
        await fake_client.configs.delete("a", propagation_policy="Sometimes")
