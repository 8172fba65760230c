"""The built-in ProjectSet with the scheduler, the ProjectSet controller, two real agents and real Docker: a set of
3 replicas spreads over both nodes by default and a rolling update (maxSurge 1, maxUnavailable 0) brings every
replica to the new revision, Running. (Failed requests under load are measured by the ingress e2e.)"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

from agent_harness import StartAgent

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.client.apply import modify
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.gc import app as gc_app
from caravanserai.controllers.projectset import app as projectset_app
from caravanserai.controllers.scheduler import app as scheduler_app
from caravanserai.project.replicas import owning_set, template_hash
from caravanserai.testing.docker import DEFAULT_IMAGE
from caravanserai.testing.wait import wait_for


@contextlib.asynccontextmanager
async def controllers(client: Client) -> AsyncIterator[None]:
    clock = SystemClock()
    manager = Manager(client, clock=clock, shutdown_timeout=5.0)
    scheduler_app.setup(manager, client, clock)
    projectset_app.setup(manager, client, clock)
    gc_app.setup(manager, client, clock, gc_app.GCOptions())
    task = asyncio.create_task(manager.run(), name="e2e-projectset-controllers")
    try:
        yield
    finally:
        manager.stop()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 10)


def web_set(name: str) -> v1.ProjectSet:
    obj = v1.ProjectSet()
    obj.metadata.name = name
    obj.spec.replicas = 3
    obj.spec.selector.match_labels["app"] = name
    obj.spec.template.labels["app"] = name
    obj.spec.template.spec.services.add(name="main", image=DEFAULT_IMAGE, command=["sleep", "3600"])
    obj.spec.strategy.rolling_update.max_surge = "1"
    obj.spec.strategy.rolling_update.max_unavailable = "0"
    return obj


async def test_a_rolling_update_reaches_every_replica_on_two_agents(client: Client, start_agent: StartAgent) -> None:
    nodes = {
        (await start_agent(node=n, hostname=n)).node
        for n in (f"rs-a-{uuid.uuid4().hex[:6]}", f"rs-b-{uuid.uuid4().hex[:6]}")
    }
    name = f"web-{uuid.uuid4().hex[:6]}"
    async with controllers(client):
        await client.projectsets.create(web_set(name))

        async def replicas() -> list[v1.Project]:
            return [p for p in (await client.projects.list()).items if owning_set(p) == name]

        async def settled(revision: str) -> bool:
            s = (await client.projectsets.get(name)).status
            return s.update_revision == s.current_revision == revision and s.available_replicas == 3 == s.replicas

        first = template_hash(web_set(name).spec.template)
        await wait_for(lambda: settled(first), 60)
        assert {p.status.node_ref for p in await replicas()} == nodes  # spread by default

        def change(obj: v1.ProjectSet) -> bool:
            obj.spec.template.spec.services[0].command[:] = ["sleep", "7200"]
            return True

        updated, _ = await modify(client.projectsets, name, change)
        second = template_hash(updated.spec.template)
        await wait_for(lambda: settled(second), 90)
        final = await replicas()
        running = [p for p in final if not p.metadata.HasField("deletion_timestamp")]
        assert len(running) == 3
        assert all(
            p.status.phase == v1.RUNNING and p.metadata.labels[v1.TEMPLATE_HASH_LABEL] == second for p in running
        )
        await client.projectsets.delete(name)
        await wait_for(lambda: _none_left(replicas), 60)


async def _none_left(replicas) -> bool:  # type: ignore[no-untyped-def]  # the local coroutine function above
    return not [p for p in await replicas() if p.status.phase != v1.TERMINATED]
