"""Simulated agents for ProjectSet tests: Pending projects are bound round robin to the given nodes (skipping
cordoned ones) and reported
Running with every service ready (the Ready condition True), except services whose image names `never-ready`
(Running, not ready: a health check that never passes); Terminating projects are reported Terminated and removed.
No Docker: the controller under test sees only what an agent would write through the API."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Sequence

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.errors import ApiError
from caravanserai.project import lifecycle

CLOCK = SystemClock()
NEVER_READY = "never-ready"


def _ready_status(project: v1.Project, now: float) -> v1.Project:
    running = lifecycle.run(project, reason="ContainersRunning", message="up", now=now)
    ready = all(NEVER_READY not in s.image for s in project.spec.services)
    del running.status.services[:]
    for service in project.spec.services:
        running.status.services.add(name=service.name, state="running", ready=ready, image=service.image)
    running.status.observed_generation = project.metadata.generation
    meta.set_condition(
        running.status.conditions,
        v1.CONDITION_READY,
        v1.TRUE if ready else v1.FALSE,
        reason="Ready" if ready else "NotReady",
        message="sim",
        now=now,
    )
    return running


async def _step(client: Client, nodes: itertools.cycle[str]) -> None:
    now = CLOCK.now()
    cordoned = {n.metadata.name for n in (await client.nodes.list()).items if n.spec.unschedulable}
    for project in (await client.projects.list()).items:
        if project.status.phase == v1.PENDING and not project.metadata.HasField("deletion_timestamp"):
            node = next(nodes)
            for _ in range(len(cordoned)):
                node = node if node not in cordoned else next(nodes)
            if node in cordoned:
                continue
            bound = await client.projects.update_status(lifecycle.bind(project, node, now=now))
            await client.projects.update_status(_ready_status(bound, now))
        elif project.status.phase == v1.TERMINATING:
            await client.projects.update_status(lifecycle.terminate(project, reason="Stopped", message="", now=now))
        elif project.status.phase == v1.TERMINATED:
            await client.projects.delete(project.metadata.name, force=True)


@contextlib.asynccontextmanager
async def simulated_agents(client: Client, nodes: Sequence[str], *, period: float = 0.05) -> AsyncIterator[None]:
    """Run the simulation (module docstring) until the block exits."""
    cycle = itertools.cycle(nodes)

    async def loop() -> None:
        while True:
            with contextlib.suppress(ApiError):
                await _step(client, cycle)
            await asyncio.sleep(period)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
