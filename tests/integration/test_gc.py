"""The garbage collector against a real apiserver, with small real durations."""

from __future__ import annotations

import asyncio

from cluster_sim import add_node, condition, events_for, running_manager, set_phase

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock, timestamp
from caravanserai.controller import EventRecorder
from caravanserai.controllers.gc import app
from caravanserai.controllers.gc.policy import GCConfig, Verdict
from caravanserai.controllers.gc.reconciler import GCReconciler
from caravanserai.errors import NotFound
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

CLOCK = SystemClock()


def collector(client: Client, delay: float = 0.5):  # type: ignore[no-untyped-def]  # returns running_manager's context manager; its type is left to inference
    options = app.GCOptions(GCConfig(terminated_delay=delay))
    return running_manager(client, lambda m: app.setup(m, client, CLOCK, options))


async def exists(client: Client, name: str) -> bool:
    try:
        await client.projects.get(name)
    except NotFound:
        return False
    return True


async def gone(client: Client, name: str) -> bool:
    return not await exists(client, name)


async def place(client: Client, name: str, phase: str, node: str = "n1", **spec: object) -> v1.Project:
    obj = project(name)
    if "expire_at" in spec:
        obj.spec.expire_at.CopyFrom(timestamp(spec["expire_at"]))  # type: ignore[arg-type]  # spec values are typed object; expire_at is a float
    await client.projects.create(obj)
    if phase != v1.PENDING:
        await set_phase(client, name, v1.SCHEDULED, node_ref=node)
    if phase in (v1.RUNNING, v1.FAILED, v1.TERMINATING):
        await set_phase(client, name, v1.RUNNING)
    if phase == v1.FAILED:
        await set_phase(client, name, v1.FAILED)
    if phase == v1.TERMINATING:
        await client.projects.delete(name)
    return await client.projects.get(name)


async def test_terminated_projects_are_deleted_after_the_delay(client: Client) -> None:
    await add_node(client, "n1")
    await place(client, "done", v1.TERMINATING)
    async with collector(client, delay=0.6):
        await asyncio.sleep(0.3)
        assert await exists(client, "done")  # Terminating: the agent's business, not ours
        finished = asyncio.get_running_loop().time()
        await set_phase(client, "done", v1.TERMINATED)  # the agent reports the containers removed
        await asyncio.sleep(0.3)
        assert await exists(client, "done")  # kept a moment so watchers see the final state
        await wait_for(lambda: gone(client, "done"), 5)
        assert asyncio.get_running_loop().time() - finished >= 0.6


async def test_expired_projects_are_deleted(client: Client) -> None:
    await add_node(client, "n1")
    soon = CLOCK.now() + 0.8
    await place(client, "pending", v1.PENDING, expire_at=soon)
    await place(client, "running", v1.RUNNING, expire_at=soon)
    await place(client, "later", v1.RUNNING, expire_at=CLOCK.now() + 3600)
    async with collector(client):
        await asyncio.sleep(0.4)
        assert await exists(client, "pending")
        await wait_for(lambda: gone(client, "pending"), 5)  # nothing runs: removed at once

        async def terminating() -> bool:
            return (await client.projects.get("running")).status.phase == v1.TERMINATING

        await wait_for(terminating, 5)  # active: a normal Delete, the agent stops it first
        assert [e.spec.reason for e in await events_for(client, "running", "Expired")] == ["Expired"]
        assert (await client.projects.get("later")).status.phase == v1.RUNNING


async def test_projects_on_a_deleted_node(client: Client) -> None:
    await add_node(client, "n1")
    await add_node(client, "n2")
    for name, phase in (("sched", v1.SCHEDULED), ("run", v1.RUNNING), ("term", v1.TERMINATING), ("dead", v1.FAILED)):
        await place(client, name, phase)
    await place(client, "other", v1.RUNNING, node="n2")
    async with collector(client, delay=0.3):
        await asyncio.sleep(0.3)
        await client.nodes.delete("n1", force=True)

        async def rescued() -> bool:
            phases = [(await client.projects.get(n)).status for n in ("sched", "run")]
            return all(s.phase == v1.PENDING and not s.node_ref for s in phases)

        await wait_for(rescued, 5)
        run = await client.projects.get("run")
        phase = condition(run, v1.CONDITION_PHASE)
        assert phase is not None and phase.reason == "NodeDeleted"
        assert await events_for(client, "run", "NodeDeleted")
        await wait_for(lambda: gone(client, "term"), 5)  # finished (Terminated), then collected
        dead = await client.projects.get("dead")
        assert (dead.status.phase, dead.status.node_ref) == (v1.FAILED, "n1")
        other = await client.projects.get("other")
        assert (other.status.phase, other.status.node_ref) == (v1.RUNNING, "n2")


class EmptyCache:
    """A node cache that has not seen any node yet (an informer lagging behind)."""

    def get(self, name: str) -> None:
        return None


class LiveProjects:
    """A project cache holding exactly the given objects."""

    def __init__(self, *projects: v1.Project) -> None:
        self._items = {p.metadata.name: p for p in projects}

    def get(self, name: str) -> v1.Project | None:
        return self._items.get(name)


async def test_absence_is_confirmed_with_a_live_read(client: Client) -> None:
    await add_node(client, "n1")
    running = await place(client, "run", v1.RUNNING)
    recorder = EventRecorder(client, component="test")
    reconciler = GCReconciler(client, LiveProjects(running), EmptyCache(), recorder, clock=CLOCK)  # type: ignore[arg-type]  # LiveProjects and EmptyCache are fakes of the informer caches
    await reconciler.reconcile("run")
    kept = await client.projects.get("run")  # the node exists: nothing was done on the stale cache's word
    assert (kept.status.phase, kept.status.node_ref, kept.metadata.resource_version) == (
        v1.RUNNING,
        "n1",
        running.metadata.resource_version,
    )
    assert reconciler.actions == {}

    await client.nodes.delete("n1", force=True)
    await reconciler.reconcile("run")
    assert (await client.projects.get("run")).status.phase == v1.PENDING
    assert reconciler.actions == {Verdict.UNBIND_ORPHAN: 1}


async def test_succeeded_projects_are_deleted_after_the_ttl_when_one_is_set(client: Client) -> None:
    await add_node(client, "n1")
    await place(client, "job", v1.RUNNING)
    await set_phase(client, "job", v1.SUCCEEDED)
    await place(client, "kept", v1.RUNNING)
    options = app.GCOptions(GCConfig(succeeded_ttl=0.5))
    async with running_manager(client, lambda m: app.setup(m, client, CLOCK, options)):

        async def terminating() -> bool:
            return (await client.projects.get("job")).status.phase == v1.TERMINATING

        await wait_for(terminating, 5)  # a normal Delete: the agent removes the exited containers first
        assert [e.spec.reason for e in await events_for(client, "job", "SucceededTTLExpired")] == [
            "SucceededTTLExpired"
        ]
        assert (await client.projects.get("kept")).status.phase == v1.RUNNING
    await set_phase(client, "kept", v1.SUCCEEDED)
    async with collector(client):  # no --succeeded-ttl: Succeeded projects stay until deleted
        await asyncio.sleep(0.8)
        assert (await client.projects.get("kept")).status.phase == v1.SUCCEEDED
