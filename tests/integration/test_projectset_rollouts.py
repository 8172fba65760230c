"""The ProjectSet controller against a real etcd and apiserver, with simulated agents (`replica_sim`): scale up
and down, the default spread, a rolling update within maxSurge/maxUnavailable, Recreate, a rollout that misses its
progress deadline and stops, undo to an older revision, pause and resume, and owner GC of the replicas."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cluster_sim import add_node, condition, running_manager
from replica_sim import NEVER_READY, simulated_agents

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controllers.gc import app as gc_app
from caravanserai.controllers.projectset import app
from caravanserai.errors import Conflict
from caravanserai.project.affinity import HOSTNAME_KEY, SCHEDULE_ANYWAY
from caravanserai.project.replicas import owning_set, template_hash
from caravanserai.testing.wait import wait_for

CLOCK = SystemClock()
NODES = ("n1", "n2")


def projectset(name: str = "web", *, replicas: int = 3, image: str = "busybox:v1", **spec: Any) -> v1.ProjectSet:
    obj = v1.ProjectSet()
    obj.metadata.name = name
    obj.spec.replicas = replicas
    obj.spec.selector.match_labels["app"] = name
    obj.spec.template.labels["app"] = name
    obj.spec.template.spec.services.add(name="main", image=image, command=["sleep", "3600"])
    for key, value in spec.items():
        setattr(obj.spec, key, value)
    return obj


def controllers(client: Client):  # type: ignore[no-untyped-def]  # returns running_manager's context manager
    def setup(manager: Any) -> None:
        app.setup(manager, client, CLOCK)
        gc_app.setup(manager, client, CLOCK, gc_app.GCOptions())

    return running_manager(client, setup)


async def replicas_of(client: Client, name: str = "web") -> list[v1.Project]:
    return [p for p in (await client.projects.list()).items if owning_set(p) == name]


async def status_is(client: Client, check: Callable[[v1.ProjectSetStatus], bool], name: str = "web") -> bool:
    return check((await client.projectsets.get(name)).status)


async def edit(client: Client, change: Callable[[v1.ProjectSet], None], name: str = "web") -> v1.ProjectSet:
    """Change the set's spec as a user would: read, change, write; read again on Conflict."""
    for _ in range(20):
        current = await client.projectsets.get(name)
        change(current)
        try:
            return await client.projectsets.update(current)
        except Conflict:
            continue
    raise AssertionError("the set kept changing")


async def set_image(client: Client, image: str, name: str = "web") -> str:
    def change(s: v1.ProjectSet) -> None:
        s.spec.template.spec.services[0].image = image

    return template_hash((await edit(client, change, name)).spec.template)


def settled(desired: int, revision: str | None = None) -> Callable[[v1.ProjectSetStatus], bool]:
    def check(s: v1.ProjectSetStatus) -> bool:
        same = revision is None or s.update_revision == s.current_revision == revision
        return same and s.replicas == s.updated_replicas == s.available_replicas == desired

    return check


async def test_scale_up_and_down_with_owner_references_and_the_default_spread(client: Client) -> None:
    for name in NODES:
        await add_node(client, name)
    async with controllers(client), simulated_agents(client, NODES):
        created = await client.projectsets.create(projectset(replicas=3))
        assert created.spec.strategy.type == v1.ROLLING_UPDATE and created.spec.progress_deadline_seconds == 600
        await wait_for(lambda: status_is(client, settled(3)), 10)
        projects = await replicas_of(client)
        assert len(projects) == 3
        for p in projects:
            ref = meta.controller_of(p)
            assert ref is not None and ref.uid == created.metadata.uid
            assert p.metadata.labels[v1.TEMPLATE_HASH_LABEL] == template_hash(created.spec.template)
            spread = p.spec.topology_spread_constraints[0]
            assert (spread.topology_key, spread.max_skew, spread.when_unsatisfiable) == (
                HOSTNAME_KEY,
                1,
                SCHEDULE_ANYWAY,
            )
            assert dict(spread.label_selector.match_labels) == {"app": "web"}
        await edit(client, lambda s: setattr(s.spec, "replicas", 1))
        await wait_for(lambda: status_is(client, settled(1)), 10)
        await wait_for(lambda: _count(client, 1), 10)
        await client.projectsets.delete("web")
        await wait_for(lambda: _count(client, 0), 10)


async def _count(client: Client, n: int) -> bool:
    return len(await replicas_of(client)) == n


async def test_a_rolling_update_keeps_within_surge_and_unavailable(client: Client) -> None:
    for name in NODES:
        await add_node(client, name)
    async with controllers(client), simulated_agents(client, NODES):
        obj = projectset(replicas=4)
        obj.spec.strategy.rolling_update.max_surge = "1"
        obj.spec.strategy.rolling_update.max_unavailable = "0"
        await client.projectsets.create(obj)
        await wait_for(lambda: status_is(client, settled(4)), 10)
        revision = await set_image(client, "busybox:v2")
        most, fewest_available = 0, 4

        async def done() -> bool:
            nonlocal most, fewest_available
            active = [p for p in await replicas_of(client) if not p.metadata.HasField("deletion_timestamp")]
            most = max(most, len(active))
            ready = [p for p in active if p.status.phase == v1.RUNNING]
            fewest_available = min(fewest_available, len(ready))
            return await status_is(client, settled(4, revision))

        await wait_for(done, 20)
        assert most <= 5 and fewest_available >= 4  # maxSurge 1, maxUnavailable 0
        final = await client.projectsets.get("web")
        assert [r.revision for r in final.status.revisions] == [1, 2]
        assert final.status.current_revision == revision
        assert condition(final, v1.CONDITION_PROGRESSING).reason == "NewRevisionAvailable"


async def test_recreate_removes_every_old_replica_before_the_first_new_one(client: Client) -> None:
    await add_node(client, "n1")
    async with controllers(client), simulated_agents(client, ["n1"]):
        obj = projectset(replicas=3)
        obj.spec.strategy.type = v1.RECREATE
        await client.projectsets.create(obj)
        await wait_for(lambda: status_is(client, settled(3)), 10)
        old = template_hash(obj.spec.template)
        revision = await set_image(client, "busybox:v2")
        mixed = False

        async def done() -> bool:
            nonlocal mixed
            alive = [p for p in await replicas_of(client) if p.status.phase != v1.TERMINATED]  # containers gone
            revisions = {p.metadata.labels[v1.TEMPLATE_HASH_LABEL] for p in alive}
            mixed = mixed or revisions == {old, revision}
            return await status_is(client, settled(3, revision))

        await wait_for(done, 20)
        assert not mixed


async def test_a_rollout_past_its_deadline_fails_and_stops_then_undo_and_pause(client: Client) -> None:
    for name in NODES:
        await add_node(client, name)
    async with controllers(client), simulated_agents(client, NODES):
        obj = projectset(replicas=3, min_ready_seconds=0)
        obj.spec.progress_deadline_seconds = 2
        obj.spec.strategy.rolling_update.max_surge = "1"
        obj.spec.strategy.rolling_update.max_unavailable = "0"
        await client.projectsets.create(obj)
        await wait_for(lambda: status_is(client, settled(3)), 10)
        good = template_hash(obj.spec.template)
        await set_image(client, f"busybox:{NEVER_READY}")
        await wait_for(lambda: _failed(client), 15)
        projects = await replicas_of(client)
        by_revision = [p.metadata.labels[v1.TEMPLATE_HASH_LABEL] for p in projects]
        assert by_revision.count(good) == 3 and len(projects) == 4  # one surge replica, the old ones all serve
        await edit(client, lambda s: setattr(s.spec, "replicas", 4))  # a failed rollout still scales what serves
        await wait_for(lambda: _by_revision(client, good, 4), 10)
        assert len(await replicas_of(client)) == 5  # the failed revision's replica stays as it was
        await edit(client, lambda s: setattr(s.spec, "replicas", 3))
        await wait_for(lambda: _by_revision(client, good, 3), 10)
        # undo: the template of revision 1 comes back as revision 3
        current = await client.projectsets.get("web")
        first = next(r for r in current.status.revisions if r.hash == good)
        await edit(client, lambda s: s.spec.template.CopyFrom(first.template))
        await wait_for(lambda: status_is(client, settled(3, good)), 15)
        undone = await client.projectsets.get("web")
        assert max(r.revision for r in undone.status.revisions if r.hash == good) == 3
        # pause: a template change starts no rollout; resume rolls it out
        await edit(client, lambda s: setattr(s.spec, "paused", True))
        revision = await set_image(client, "busybox:v3")
        await wait_for(lambda: status_is(client, lambda s: condition_reason(s) == "ProjectSetPaused"), 10)
        # the failed surge replica may still be winding down; no live replica has the paused template
        live = [p for p in await replicas_of(client) if not p.metadata.HasField("deletion_timestamp")]
        assert {p.metadata.labels[v1.TEMPLATE_HASH_LABEL] for p in live} == {good}
        await edit(client, lambda s: setattr(s.spec, "paused", False))
        await wait_for(lambda: status_is(client, settled(3, revision)), 15)


def condition_reason(status: v1.ProjectSetStatus) -> str:
    found = meta.get_condition(status.conditions, v1.CONDITION_PROGRESSING)
    return found.reason if found else ""


async def _failed(client: Client) -> bool:
    return await status_is(client, lambda s: condition_reason(s) == v1.REASON_PROGRESS_DEADLINE_EXCEEDED)


async def _by_revision(client: Client, revision: str, count: int) -> bool:
    """Whether exactly `count` live replicas (not being deleted) have template `revision`."""
    live = [p for p in await replicas_of(client) if not p.metadata.HasField("deletion_timestamp")]
    return sum(1 for p in live if p.metadata.labels[v1.TEMPLATE_HASH_LABEL] == revision) == count
