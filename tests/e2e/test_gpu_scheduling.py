"""Extended resources end to end: an agent declaring `--resource gpu=2` (kept across re-registration, with its
automatic labels), the scheduler placing two 1-gpu projects on it and leaving a third Pending as unavailable, and a
3-gpu project as infeasible."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from agent_harness import StartAgent, wait_phase

from caravanserai import meta, v1
from caravanserai.agent.host import extended
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.scheduler import app as scheduler_app
from caravanserai.testing.builders import project
from caravanserai.testing.manager import running
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker


@contextlib.asynccontextmanager
async def scheduler(client: Client) -> AsyncIterator[None]:
    clock = SystemClock()
    manager = Manager(client, clock=clock, shutdown_timeout=5.0)
    scheduler_app.setup(manager, client, clock)
    async with running(manager):
        yield


async def unschedulable(client: Client, name: str) -> str:
    p = await client.projects.get(name)
    cond = meta.get_condition(p.status.conditions, v1.CONDITION_SCHEDULED)
    return cond.message if p.status.phase == v1.PENDING and cond is not None and cond.status == v1.FALSE else ""


async def test_two_of_three_one_gpu_projects_fit(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent(resources={"gpu": 2})
    node = await client.nodes.get(agent.node)
    assert node.status.capacity["gpu"] == "2" and node.status.allocatable["gpu"] == "2"
    assert {extended.LABEL_HOSTNAME, extended.LABEL_OS, extended.LABEL_ARCH} <= set(node.metadata.labels)
    await client.nodes.delete(agent.node, force=True)  # the agent registers again: the declared gpus stay

    async def registered_again() -> bool:
        again = await client.nodes.get(agent.node)
        return again.status.allocatable.get("gpu") == "2" and again.status.state == v1.NODE_READY

    await wait_for(registered_again, timeout=20)
    async with scheduler(client):
        for name in ("gpu-a", "gpu-b"):
            await client.projects.create(project(name, image=image, requests={"gpu": "1"}))
            await wait_phase(client, name, v1.RUNNING, timeout=60)
        await client.projects.create(project("gpu-c", image=image, requests={"gpu": "1"}))
        message = await wait_for(lambda: unschedulable(client, "gpu-c"), timeout=30)
        assert message == "0/1 nodes are available: 1 insufficient gpu."  # unavailable: it fits once one leaves
        await client.projects.create(project("gpu-big", image=image, requests={"gpu": "3"}))
        message = await wait_for(lambda: unschedulable(client, "gpu-big"), timeout=30)
        assert message == "0/1 nodes are available: 1 insufficient gpu. No node can ever fit this project (infeasible)."
        await client.projects.delete("gpu-a")
        await wait_phase(client, "gpu-c", v1.RUNNING, timeout=60)
