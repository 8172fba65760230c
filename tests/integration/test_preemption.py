"""Preemption with the real scheduler, apiserver and etcd, over simulated nodes (Node + Lease objects, no agent):
a high-priority project that fits nowhere evicts the smallest set of lower-priority projects, waits nominated,
and is bound once the room is free; Never, equal priority and "would not fit even after" preempt nothing."""

from __future__ import annotations

import asyncio

from caractrl_runner import Caractrl, cli  # noqa: F401 (fixtures)
from cluster_sim import add_node, condition, events_for, running_manager, set_phase

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controllers.scheduler import app
from caravanserai.controllers.scheduler.preemption.preemptor import NO_ROOM, NOT_ALLOWED
from caravanserai.project import lifecycle
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

CLOCK = SystemClock()


def scheduler(client: Client):  # type: ignore[no-untyped-def]  # returns running_manager's context manager; its type is left to inference
    return running_manager(client, lambda m: app.setup(m, client, CLOCK))


async def running_on(client: Client, obj: v1.Project, node: str) -> v1.Project:
    """Create `obj` and bind it to `node` as Running, as the scheduler and the node's agent would."""
    await client.projects.create(obj)
    await set_phase(client, obj.metadata.name, v1.SCHEDULED, node_ref=node)
    return await set_phase(client, obj.metadata.name, v1.RUNNING)


async def wait_phase(client: Client, name: str, phase: str, node: str | None = None) -> v1.Project:
    async def check() -> v1.Project | None:
        p = await client.projects.get(name)
        return p if p.status.phase == phase and (node is None or p.status.node_ref == node) else None

    return await wait_for(check, 10, message=f"{name} {phase} {node or ''}")


async def wait_scheduled_message(client: Client, name: str, part: str) -> v1.Project:
    async def check() -> v1.Project | None:
        p = await client.projects.get(name)
        cond = condition(p, v1.CONDITION_SCHEDULED)
        return p if cond is not None and part in cond.message else None

    return await wait_for(check, 10, message=f"{name}: {part}")


def backed_up(name: str, **kwargs: object) -> v1.Project:
    obj = project(name, **kwargs)  # type: ignore[arg-type]  # the builder's keyword arguments, passed through
    volume = obj.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT)
    volume.backup.repository, volume.backup.every, volume.backup.keep.last = "offsite", "5m", 3
    return obj


async def test_the_fewest_lowest_victims_are_evicted_and_the_preemptor_bound_in_their_room(client: Client) -> None:
    for name in ("n1", "n2", "n3"):
        await add_node(client, name, cpu="2")
    await running_on(client, project("n1-a", requests={"cpu": "1"}, priority=1), "n1")
    await running_on(client, project("n1-b", requests={"cpu": "1"}, priority=1), "n1")
    await running_on(client, project("n2-one", requests={"cpu": "2"}, priority=1), "n2")
    await running_on(client, project("n3-mid", requests={"cpu": "2"}, priority=5), "n3")
    await client.projects.create(project("urgent", requests={"cpu": "2"}, priority=10))
    async with scheduler(client):
        urgent = await wait_phase(client, "urgent", v1.SCHEDULED, "n2")
        assert urgent.status.nominated_node_name == ""  # a bound project has no nomination
        victim = await wait_phase(client, "n2-one", v1.PENDING)
        preempted = condition(victim, v1.CONDITION_PREEMPTED)
        assert preempted is not None and preempted.status == v1.TRUE
        assert "Preempted by project urgent" in preempted.message
        assert victim.status.previous_node_ref == ""  # no hand-off: the room is needed now
        (event,) = await events_for(client, "n2-one", "Preempted")
        assert "urgent" in event.spec.message and event.spec.type == "Warning"
        (why,) = await events_for(client, "urgent", "Preempting")
        assert "Preempting on node n2: evicting project n2-one (priority 1)" in why.spec.message
        assert "of 3 node(s)" in why.spec.message
        await wait_scheduled_message(client, "n2-one", "0/3 nodes are available")  # scheduled again like any project
        for name in ("n1-a", "n1-b", "n3-mid"):
            assert (await client.projects.get(name)).status.phase == v1.RUNNING


async def test_describe_explains_the_nomination_and_the_preemption(cli: Caractrl, client: Client) -> None:
    await add_node(client, "n1", cpu="2")
    await running_on(client, backed_up("db", requests={"cpu": "2"}, priority=0), "n1")
    await client.projects.create(project("urgent", requests={"cpu": "2"}, priority=10))
    async with scheduler(client):
        await wait_for(lambda: moving(client, "db"), 10, message="db evicted")
        await wait_scheduled_message(client, "urgent", "Preempting on node n1")
    urgent = (await cli("describe", "project", "urgent")).stdout
    assert "Nominated Node:" in urgent and "n1 (room kept there while its victims leave)" in urgent
    assert "evicting project db (priority 0). The fewest projects of lower priority (1)" in urgent
    assert "Preempting" in urgent.split("Events:\n")[1]
    db = (await cli("describe", "project", "db")).stdout
    assert "Preempted:" in db and "Preempted by project urgent: to make room for project urgent (priority 10)" in db
    assert "Preempted" in db.split("Events:\n")[1]


async def moving(client: Client, name: str) -> v1.Project | None:
    p = await client.projects.get(name)
    return p if p.status.HasField("move") else None


async def test_the_preemptor_waits_nominated_until_its_victim_has_left(client: Client) -> None:

    await add_node(client, "n1", cpu="2")
    await running_on(client, backed_up("db", requests={"cpu": "2"}, priority=0), "n1")
    await client.projects.create(project("urgent", requests={"cpu": "2"}, priority=10))
    async with scheduler(client):

        async def nominated() -> v1.Project | None:
            p = await client.projects.get("urgent")
            return p if p.status.nominated_node_name == "n1" else None

        await wait_for(nominated, 10, message="urgent nominated to n1")

        async def moving() -> v1.Project | None:  # the eviction is written just after the nomination
            p = await client.projects.get("db")
            return p if p.status.move.reason == "Preempted" else None

        db = await wait_for(moving, 10, message="db preempted")
        assert db.status.phase == v1.RUNNING  # still running: final backups first
        await client.projects.create(project("sneaky", requests={"cpu": "1"}, priority=5))
        await asyncio.sleep(0.5)
        assert (await client.projects.get("urgent")).status.phase == v1.PENDING  # not bound before the room is free
        db = await client.projects.get("db")
        await client.projects.update_status(lifecycle.finish_move(db, handoff={"data": "ab" * 32}, now=CLOCK.now()))
        urgent = await wait_phase(client, "urgent", v1.SCHEDULED, "n1")
        assert urgent.status.nominated_node_name == ""
        await asyncio.sleep(0.3)
        assert (await client.projects.get("sneaky")).status.phase == v1.PENDING  # the room went to urgent


async def test_never_and_equal_priority_preempt_nothing(client: Client) -> None:
    await add_node(client, "n1", cpu="1")
    await running_on(client, project("peer", requests={"cpu": "1"}, priority=10), "n1")
    await client.projects.create(project("equal", requests={"cpu": "1"}, priority=10))
    polite = project("polite", requests={"cpu": "1"}, priority=50)
    polite.spec.preemption_policy = v1.PREEMPT_NEVER
    await client.projects.create(polite)
    async with scheduler(client):
        await wait_scheduled_message(client, "polite", NOT_ALLOWED)
        equal = await wait_scheduled_message(client, "equal", "0/1 nodes are available: 1 insufficient cpu.")
        assert "Preemption" not in condition(equal, v1.CONDITION_SCHEDULED).message  # type: ignore[union-attr]  # found just above
        await asyncio.sleep(0.3)

        peer = await client.projects.get("peer")
        assert peer.status.phase == v1.RUNNING and condition(peer, v1.CONDITION_PREEMPTED) is None


async def test_nothing_is_preempted_when_the_preemptor_would_not_fit_even_after(client: Client) -> None:
    await add_node(client, "n1", cpu="2")
    await add_node(client, "n2", cpu="2", unschedulable=True)
    await running_on(client, project("low", requests={"cpu": "1"}, priority=0), "n1")
    await running_on(client, project("peer", requests={"cpu": "1"}, priority=10), "n1")
    await running_on(client, project("cordoned-low", requests={"cpu": "2"}, priority=0), "n2")
    await client.projects.create(project("urgent", requests={"cpu": "2"}, priority=10))
    await client.projects.create(project("huge", requests={"cpu": "8"}, priority=99))
    async with scheduler(client):
        await wait_scheduled_message(client, "urgent", NO_ROOM)
        huge = await wait_scheduled_message(client, "huge", "(infeasible)")
        assert "Preemption" not in condition(huge, v1.CONDITION_SCHEDULED).message  # type: ignore[union-attr]  # found just above
        assert huge.status.nominated_node_name == ""
        for name in ("low", "cordoned-low"):
            assert (await client.projects.get(name)).status.phase == v1.RUNNING


async def test_a_nomination_ends_when_preemption_no_longer_helps(client: Client) -> None:
    await add_node(client, "n1", cpu="2")
    await client.projects.create(project("urgent", requests={"cpu": "2"}, priority=10))
    stale = meta.copy(await client.projects.get("urgent"))
    stale.status.nominated_node_name = "n1"
    await client.projects.update_status(stale)  # e.g. left by a scheduler that stopped
    await running_on(client, project("peer", requests={"cpu": "2"}, priority=10), "n1")
    async with scheduler(client):

        async def cleared() -> v1.Project | None:
            p = await client.projects.get("urgent")
            return p if not p.status.nominated_node_name and condition(p, v1.CONDITION_SCHEDULED) else None

        await wait_for(cleared, 10, message="the stale nomination cleared")
