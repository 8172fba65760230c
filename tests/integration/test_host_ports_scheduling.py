"""Host ports as a node resource, with the real scheduler against a real apiserver and etcd (simulated nodes): a
project never lands where another one holds one of its host ports, nor where a drained project's old copy still
runs during its hand-off; the Unschedulable message counts those nodes; a freed port wakes the waiting project."""

from __future__ import annotations

import asyncio

from cluster_sim import add_node, condition, running_manager

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controllers.scheduler import app
from caravanserai.project import lifecycle
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

CLOCK = SystemClock()


def scheduler(client: Client):  # type: ignore[no-untyped-def]  # running_manager's context manager, left to inference
    return running_manager(client, lambda m: app.setup(m, client, CLOCK, app.SchedulerOptions()))


def publishing(name: str, host_port: int) -> v1.Project:
    p = project(name)
    p.spec.services[0].ports.add(container_port=80, host_port=host_port)
    return p


async def running_on(client: Client, name: str, node: str) -> v1.Project:
    p = await client.projects.get(name)
    p = await client.projects.update_status(lifecycle.bind(p, node, now=CLOCK.now()))
    return await client.projects.update_status(
        lifecycle.run(p, reason="ContainersRunning", message="up", now=CLOCK.now())
    )


async def bound(client: Client, name: str) -> v1.Project:
    async def check() -> v1.Project | None:
        p = await client.projects.get(name)
        return p if p.status.phase == v1.SCHEDULED else None

    return await wait_for(check, 10, message=f"{name} bound")


async def unschedulable(client: Client, name: str) -> str:
    async def check() -> str | None:
        cond = condition(await client.projects.get(name), v1.CONDITION_SCHEDULED)
        return cond.message if cond is not None and cond.reason == "Unschedulable" else None

    return await wait_for(check, 10, message=f"{name} unschedulable")


async def test_a_taken_host_port_keeps_a_project_off_the_node_and_its_release_wakes_it(client: Client) -> None:
    await add_node(client, "big", cpu="64", memory="256Gi")  # the spread score prefers it by far
    await add_node(client, "small")
    await client.projects.create(publishing("web", 8080))
    await running_on(client, "web", "big")
    await client.projects.create(publishing("api", 8080))
    await client.projects.create(publishing("other", 9090))
    async with scheduler(client):
        assert (await bound(client, "api")).status.node_ref == "small"  # not next to web's port 8080
        assert (await bound(client, "other")).status.node_ref == "big"  # another port: big as usual
        await client.projects.create(publishing("cache", 8080))
        message = await unschedulable(client, "cache")
        assert message == "0/2 nodes are available: 2 node(s) didn't have free ports."
        await asyncio.sleep(1.2)  # its retry backoff grows past the next check
        started = asyncio.get_running_loop().time()
        await client.projects.delete("web", force=True)
        assert (await bound(client, "cache")).status.node_ref == "big"
        assert asyncio.get_running_loop().time() - started < 1.0  # woken by the release, not by a retry timer


async def test_the_old_copy_of_a_hand_off_holds_its_ports_until_the_project_runs_elsewhere(client: Client) -> None:
    await add_node(client, "big", cpu="64", memory="256Gi")
    await add_node(client, "n2")
    await add_node(client, "n3")
    await client.projects.create(publishing("old", 9090))
    running = await running_on(client, "old", "big")
    now = CLOCK.now()
    drained = lifecycle.move(running, reason="NodeDrained", message="drained", now=now, handoff_until=now + 300)
    await client.projects.update_status(drained)  # Pending; big keeps the old containers (and port 9090)
    async with scheduler(client):
        moved = await bound(client, "old")
        assert moved.status.node_ref in ("n2", "n3") and moved.status.previous_node_ref == "big"
        await client.projects.create(publishing("new", 9090))
        placed = await bound(client, "new")  # not big (the old copy), not old's new node
        assert {placed.status.node_ref, moved.status.node_ref} == {"n2", "n3"}
        await client.projects.update_status(  # old runs on its new node: the hand-off ends, big's copy goes
            lifecycle.run(moved, reason="ContainersRunning", message="up", now=CLOCK.now())
        )
        await client.projects.create(publishing("third", 9090))
        assert (await bound(client, "third")).status.node_ref == "big"
