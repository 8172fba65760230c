"""Owner references and their garbage collection against a real etcd, apiserver and the gc controllers: the three
propagation policies, custom-kind owners with project dependents, recreated owners and owner-reference
validation on built-in and custom kinds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)
from cluster_sim import running_manager

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controllers.gc import app
from caravanserai.errors import Invalid, NotFound
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for
from support.customkinds import define_webfarm, webfarm, webfarm_messages

CLOCK = SystemClock()
HOLD = "example.com/hold"


def collector(client: Client):  # type: ignore[no-untyped-def]  # returns running_manager's context manager
    return running_manager(client, lambda m: app.setup(m, client, CLOCK, app.GCOptions()))


async def stored(client: Client, plural: str, name: str) -> Any | None:
    try:
        return await client.resource(plural).get(name)
    except NotFound:
        return None


async def gone(client: Client, plural: str, name: str) -> bool:
    return await stored(client, plural, name) is None


async def owner_set(client: Client, name: str = "web") -> Any:
    await define_webfarm(client)
    return await client.resource(webfarm_messages().WebFarm).create(webfarm(name, replicas=2))


async def dependent(client: Client, name: str, owner: Any, *, finalizers: tuple[str, ...] = ()) -> v1.Project:
    obj = project(name)
    meta.set_owner(obj, owner, controller=True)
    obj.metadata.finalizers.extend(finalizers)
    return await client.projects.create(obj)


async def test_background_deletes_the_owner_at_once_and_its_dependents_after(client: Client) -> None:
    owner = await owner_set(client)
    await dependent(client, "web-0", owner)
    await dependent(client, "web-1", owner)
    config = v1.Config()
    config.metadata.name = "web-settings"
    meta.set_owner(config, owner)
    await client.configs.create(config)
    async with collector(client):
        response = await client.resource("webfarms").delete("web")
        assert response.deleted  # Background: the owner goes at once
        for plural, name in (("projects", "web-0"), ("projects", "web-1"), ("configs", "web-settings")):
            await wait_for(lambda p=plural, n=name: gone(client, p, n), 10)


async def test_foreground_keeps_the_owner_until_blocking_dependents_are_gone(client: Client) -> None:
    owner = await owner_set(client)
    await dependent(client, "web-0", owner, finalizers=(HOLD,))
    async with collector(client):
        response = await client.resource("webfarms").delete("web", propagation_policy=meta.PROPAGATION_FOREGROUND)
        assert not response.deleted
        marked = await client.resource("webfarms").get("web")
        assert marked.metadata.HasField("deletion_timestamp")
        assert list(marked.metadata.finalizers) == [meta.FINALIZER_FOREGROUND]

        async def dependent_marked() -> bool:
            found = await stored(client, "projects", "web-0")
            return found is not None and found.metadata.HasField("deletion_timestamp")

        await wait_for(dependent_marked, 10)
        await asyncio.sleep(0.6)  # several sweeps: the blocking dependent still holds the owner
        assert await stored(client, "webfarms", "web") is not None
        held = await client.projects.get("web-0")
        held.metadata.finalizers.remove(HOLD)
        await client.projects.update(held)  # the dependent's own finalizer is done: it goes, then its owner
        await wait_for(lambda: gone(client, "projects", "web-0"), 10)
        await wait_for(lambda: gone(client, "webfarms", "web"), 10)


async def test_orphan_leaves_the_dependents_without_the_reference(client: Client) -> None:
    owner = await owner_set(client)
    await dependent(client, "web-0", owner)
    other = await client.projects.create(project("keeper"))
    second = project("web-1")
    meta.set_owner(second, owner)
    meta.set_owner(second, other)
    await client.projects.create(second)
    async with collector(client):
        await client.resource("webfarms").delete("web", propagation_policy=meta.PROPAGATION_ORPHAN)
        await wait_for(lambda: gone(client, "webfarms", "web"), 10)
        await asyncio.sleep(0.5)  # sweeps after the owner went: nothing is collected
        kept = await client.projects.get("web-0")
        assert list(kept.metadata.owner_references) == []
        still_owned = await client.projects.get("web-1")
        assert [ref.name for ref in still_owned.metadata.owner_references] == ["keeper"]


async def test_a_dependent_of_an_owner_recreated_under_the_same_name_is_collected(client: Client) -> None:
    old = await client.projects.create(project("owner"))
    config = v1.Config()
    config.metadata.name = "of-old-owner"
    meta.set_owner(config, old)
    await client.configs.create(config)
    await client.projects.delete("owner")
    new = await client.projects.create(project("owner"))
    assert new.metadata.uid != old.metadata.uid
    current = v1.Config()
    current.metadata.name = "of-new-owner"
    meta.set_owner(current, new)
    await client.configs.create(current)
    async with collector(client):
        await wait_for(lambda: gone(client, "configs", "of-old-owner"), 10)
        await asyncio.sleep(0.5)
        assert await stored(client, "configs", "of-new-owner") is not None
        assert await stored(client, "projects", "owner") is not None


async def test_a_custom_object_owned_by_a_project_is_collected(client: Client) -> None:
    owner = await client.projects.create(project("base"))
    async with collector(client):  # the kind is defined while the collector runs: it follows it from then on
        await define_webfarm(client)
        owned = webfarm("owned", replicas=1)
        meta.set_owner(owned, owner, controller=True)
        sets = client.resource(webfarm_messages().WebFarm)
        await sets.create(owned)
        await asyncio.sleep(0.4)
        assert await stored(client, "webfarms", "owned") is not None  # the owner exists
        await client.projects.delete("base")
        await wait_for(lambda: gone(client, "webfarms", "owned"), 10)


@pytest.mark.parametrize("custom", [False, True], ids=["project", "custom"])
async def test_owner_references_are_validated_on_every_kind(client: Client, custom: bool) -> None:
    if custom:
        await define_webfarm(client)
        obj: Any = webfarm("bad", replicas=1)
        resource = client.resource(webfarm_messages().WebFarm)
    else:
        obj = project("bad")
        resource = client.projects
    obj.metadata.owner_references.add(kind="WebFarm", name="a", uid="u-1", controller=True)
    obj.metadata.owner_references.add(kind="", name="b", uid="", controller=True)
    with pytest.raises(Invalid) as refused:
        await resource.create(obj)
    message = str(refused.value)
    for path in (
        "metadata.ownerReferences[1].kind",
        "metadata.ownerReferences[1].uid",
        "metadata.ownerReferences[1].controller",
    ):
        assert path in message
    del obj.metadata.owner_references[1]
    created = await resource.create(obj)
    created.metadata.owner_references.add(kind="Project", name="c", uid="u-1")
    with pytest.raises(Invalid, match=r"metadata\.ownerReferences\[1\]\.uid"):  # the same uid twice
        await resource.update(created)


async def test_an_unknown_propagation_policy_and_orphan_with_force_are_refused(client: Client) -> None:
    await client.projects.create(project("web"))
    with pytest.raises(Invalid, match="propagationPolicy"):
        await client.projects.delete("web", propagation_policy="Sometimes")
    with pytest.raises(Invalid, match="propagationPolicy: Orphan cannot be combined with force"):
        await client.projects.delete("web", force=True, propagation_policy=meta.PROPAGATION_ORPHAN)
    assert await stored(client, "projects", "web") is not None


async def test_caractrl_delete_cascade_sends_the_policy(cli: Caractrl, client: Client) -> None:
    owner = await owner_set(client)
    await dependent(client, "web-0", owner)
    other = await client.resource("webfarms").create(webfarm("api", replicas=1))
    await dependent(client, "api-0", other)
    result = await cli("delete", "wf", "web", "--cascade=foreground")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == (
        "webfarm/web marked for deletion (stays until its finalizers are removed: foregroundDeletion)"
    )
    result = await cli("delete", "wf", "api", "--cascade", "orphan")
    assert result.exit_code == 0, result.stderr
    assert list((await client.resource("webfarms").get("api")).metadata.finalizers) == [meta.FINALIZER_ORPHAN]
    async with collector(client):
        await wait_for(lambda: gone(client, "webfarms", "web"), 10)
        await wait_for(lambda: gone(client, "webfarms", "api"), 10)
        assert await gone(client, "projects", "web-0")
        assert list((await client.projects.get("api-0")).metadata.owner_references) == []
    result = await cli("delete", "wf", "x", "--cascade=sometimes")
    assert result.exit_code == 2 and "--cascade" in result.stderr


async def test_foreground_deletes_the_whole_tree_below_the_owner_first(client: Client) -> None:
    owner = await owner_set(client)
    child = await dependent(client, "web-0", owner)
    grandchild = v1.Config()
    grandchild.metadata.name = "web-0-settings"
    grandchild.metadata.finalizers.append(HOLD)
    meta.set_owner(grandchild, child)
    await client.configs.create(grandchild)
    async with collector(client):
        await client.resource("webfarms").delete("web", propagation_policy=meta.PROPAGATION_FOREGROUND)

        async def grandchild_marked() -> bool:
            found = await stored(client, "configs", "web-0-settings")
            return found is not None and found.metadata.HasField("deletion_timestamp")

        await wait_for(grandchild_marked, 10)
        await asyncio.sleep(0.5)
        middle = await client.projects.get("web-0")  # held by its own blocking dependent
        assert list(middle.metadata.finalizers) == [meta.FINALIZER_FOREGROUND]
        assert await stored(client, "webfarms", "web") is not None
        held = await client.configs.get("web-0-settings")
        held.metadata.finalizers.remove(HOLD)
        await client.configs.update(held)
        await wait_for(lambda: gone(client, "webfarms", "web"), 10)
        assert await gone(client, "projects", "web-0") and await gone(client, "configs", "web-0-settings")


async def test_dependents_of_objects_of_a_deleted_definition_are_collected(client: Client) -> None:
    owner = await owner_set(client)
    await dependent(client, "web-0", owner)
    async with collector(client):
        await asyncio.sleep(0.4)
        assert await stored(client, "projects", "web-0") is not None
        await client.resourcedefinitions.delete("webfarms.example.com")
        await wait_for(lambda: gone(client, "projects", "web-0"), 10)
