"""Placement upkeep against a real apiserver: NoExecute taints move projects (after tolerationSeconds), a spec
change that the node no longer fits moves it, a project with backed-up volumes is moved with `status.move` (its
node takes the final backups) and then left to its node, a changed Failed project returns to Pending, and a project
being deleted is never moved."""

from __future__ import annotations

import asyncio
from typing import Any

from cluster_sim import add_node, condition, events_for, running_manager

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock, seconds
from caravanserai.controllers.placement import app
from caravanserai.controllers.placement.policy import CONDITION_TAINTED_AT
from caravanserai.project import lifecycle
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

CLOCK = SystemClock()


def upkeep(client: Client, handoff: float = 60.0):  # type: ignore[no-untyped-def]  # returns running_manager's context manager; its type is left to inference
    options = app.PlacementOptions(handoff_timeout=handoff)
    return running_manager(client, lambda m: app.setup(m, client, CLOCK, options))


async def running(client: Client, obj: v1.Project, node: str = "n1") -> v1.Project:
    p = await client.projects.create(obj)
    p = await client.projects.update_status(lifecycle.bind(p, node, now=CLOCK.now()))
    p.status.observed_generation = p.metadata.generation
    return await client.projects.update_status(
        lifecycle.run(p, reason="ContainersRunning", message="up", now=CLOCK.now())
    )


async def taint(client: Client, node: str, key: str, effect: str = "NoExecute") -> None:
    n = await client.nodes.get(node)
    n.spec.taints.add(key=key, effect=effect)
    await client.nodes.update(n)


async def phase_of(client: Client, name: str) -> str:
    return (await client.projects.get(name)).status.phase


async def test_no_execute_taint_moves_untolerating_projects_after_their_toleration_seconds(client: Client) -> None:
    await add_node(client, "n1")
    await running(client, project("plain"))
    patient = project("patient")
    patient.spec.tolerations.add(key="maint", operator="Exists", effect="NoExecute", toleration_seconds=1)
    await running(client, patient)
    forever = project("forever")
    forever.spec.tolerations.add(key="maint", operator="Exists", effect="NoExecute")
    await running(client, forever)
    async with upkeep(client, handoff=120):
        await taint(client, "n1", "maint")
        await wait_for(lambda: _is(client, "plain", v1.PENDING), 5)
        plain = await client.projects.get("plain")
        assert (plain.status.previous_node_ref, condition(plain, v1.CONDITION_PHASE).reason) == ("n1", "TaintEviction")
        assert plain.status.handoff_deadline.seconds > CLOCK.now() + 100
        stamped = await client.projects.get("patient")
        assert stamped.status.phase == v1.RUNNING and condition(stamped, CONDITION_TAINTED_AT) is not None
        await wait_for(lambda: _is(client, "patient", v1.PENDING), 5)
        await asyncio.sleep(0.5)
        assert await phase_of(client, "forever") == v1.RUNNING
        assert await events_for(client, "plain", "TaintEviction")


async def test_a_spec_change_the_node_no_longer_fits_moves_the_project(client: Client) -> None:
    await add_node(client, "n1", labels={"zone": "a"})
    await running(client, project("web", node_selector={"zone": "a"}))
    await running(client, project("api", node_selector={"zone": "a"}))
    async with upkeep(client):
        web = await client.projects.get("web")
        web.spec.node_selector["zone"] = "b"
        await client.projects.update(web)
        api = await client.projects.get("api")
        api.spec.services[0].image = "busybox:other"  # still fits: the binding is confirmed for generation 2
        await client.projects.update(api)
        await wait_for(lambda: _is(client, "web", v1.PENDING), 5)
        moved = await client.projects.get("web")
        assert condition(moved, v1.CONDITION_PHASE).reason == "NodeNoLongerEligible"
        assert moved.status.previous_node_ref == ""  # no hand-off: the old containers are of the old spec

        async def confirmed() -> bool:
            return (await client.projects.get("api")).status.scheduled_generation == 2

        await wait_for(confirmed, 5)
        assert await phase_of(client, "api") == v1.RUNNING


def backed_up(name: str, **kwargs: Any) -> v1.Project:
    """A project whose Persistent volume `data` is backed up to repository `offsite` every 5m."""
    obj = project(name, **kwargs)
    volume = obj.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT)
    volume.backup.repository, volume.backup.every, volume.backup.keep.last = "offsite", "5m", 3
    return obj


async def test_a_backed_up_project_is_moved_with_a_final_backup_and_then_left_to_its_node(client: Client) -> None:
    await add_node(client, "n1", labels={"zone": "a"})
    await running(client, backed_up("db"))
    await running(client, backed_up("wiki", node_selector={"zone": "a"}))
    async with upkeep(client, handoff=120):
        await taint(client, "n1", "maint")

        async def moving(name: str) -> v1.Project | None:
            p = await client.projects.get(name)
            return p if p.status.HasField("move") else None

        db = await wait_for(lambda: moving("db"), 5, message="db's move")
        assert (db.status.phase, db.status.node_ref) == (v1.RUNNING, "n1")  # bound until n1 hands the backup over
        assert (db.status.move.reason, db.status.move.node) == ("TaintEviction", "n1")
        assert seconds(db.status.move.deadline) > CLOCK.now() + 100
        assert condition(db, CONDITION_TAINTED_AT) is None
        await wait_for(lambda: moving("wiki"), 5, message="wiki's move (taint)")
        await asyncio.sleep(0.5)  # a move under way is not written again
        assert (await client.projects.get("db")).metadata.resource_version == db.metadata.resource_version
        (event,) = await events_for(client, "db", "TaintEviction")
        assert event.spec.count <= 1  # recorded once: the move under way is left to its node


async def test_a_backed_up_project_the_node_no_longer_fits_is_moved_after_a_final_backup(client: Client) -> None:
    await add_node(client, "n1", labels={"zone": "a"})
    await running(client, backed_up("wiki", node_selector={"zone": "a"}))
    async with upkeep(client):
        wiki = await client.projects.get("wiki")
        wiki.spec.node_selector["zone"] = "b"
        await client.projects.update(wiki)

        async def moving() -> v1.Project | None:
            p = await client.projects.get("wiki")
            return p if p.status.HasField("move") else None

        moved = await wait_for(moving, 5, message="wiki's move")
        assert (moved.status.phase, moved.status.move.reason) == (v1.RUNNING, "NodeNoLongerEligible")
        pending = lifecycle.finish_move(moved, handoff={"data": "4f1c2a9b" * 8}, now=CLOCK.now())
        await client.projects.update_status(pending)  # what n1's agent writes after the final backup
        assert (await client.projects.get("wiki")).status.phase == v1.PENDING


async def test_a_failed_project_with_a_new_generation_returns_to_pending(client: Client) -> None:
    await add_node(client, "n1")
    p = await running(client, project("job"))
    await client.projects.update_status(lifecycle.fail(p, reason="ContainerExited", message="exit 1", now=CLOCK.now()))
    async with upkeep(client):
        await asyncio.sleep(0.5)
        assert await phase_of(client, "job") == v1.FAILED  # unchanged spec: stays Failed
        job = await client.projects.get("job")
        job.spec.services[0].command[:] = ["true"]
        await client.projects.update(job)
        await wait_for(lambda: _is(client, "job", v1.PENDING), 5)
        assert condition(await client.projects.get("job"), v1.CONDITION_PHASE).reason == "SpecChanged"


async def test_a_project_being_deleted_is_never_moved(client: Client) -> None:
    await add_node(client, "n1")
    p = project("kept")
    p.metadata.finalizers.append("example.com/keep")
    await running(client, p)
    await client.projects.delete("kept")  # Terminating, held by its finalizer
    async with upkeep(client):
        await taint(client, "n1", "maint")
        await asyncio.sleep(1.0)
        kept = await client.projects.get("kept")
        assert (kept.status.phase, kept.status.node_ref) == (v1.TERMINATING, "n1")


async def _is(client: Client, name: str, phase: str) -> bool:
    return await phase_of(client, name) == phase
