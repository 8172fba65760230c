"""Disruption budgets against a real apiserver, the ProjectSet controller and simulated agents: `caractrl drain`
moves a set's replicas one budget at a time, waiting for each replacement to be available elsewhere."""

from __future__ import annotations

import asyncio

from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)
from cluster_sim import add_node
from replica_sim import simulated_agents
from test_projectset_rollouts import controllers, projectset, status_is

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.client.nodeops import set_unschedulable
from caravanserai.clock import SystemClock
from caravanserai.project.replicas import availability, owning_set
from caravanserai.testing.wait import wait_for

CLOCK = SystemClock()


async def available_now(client: Client) -> int:
    now = CLOCK.now()
    projects = (await client.projects.list()).items
    return sum(
        1 for p in projects if owning_set(p) == "web" and availability(p, min_ready_seconds=1, now=now).available
    )


async def test_drain_moves_replicas_one_budget_at_a_time(cli: Caractrl, client: Client) -> None:
    await add_node(client, "n1")
    await add_node(client, "n2", unschedulable=True)
    async with controllers(client), simulated_agents(client, ["n1", "n2"]):
        obj = projectset(replicas=3, min_ready_seconds=1)
        obj.spec.disruption_budget.max_unavailable = "1"
        await client.projectsets.create(obj)
        await wait_for(lambda: status_is(client, lambda s: s.available_replicas == 3), 15)
        assert (await client.projectsets.get("web")).status.disruptions_allowed == 1
        await set_unschedulable(client, "n2", False)
        fewest = 3
        stop = asyncio.Event()

        async def sample() -> None:
            nonlocal fewest
            while not stop.is_set():
                fewest = min(fewest, await available_now(client))
                await asyncio.sleep(0.05)

        sampler = asyncio.create_task(sample())
        try:
            drained = await cli("drain", "n1", "--timeout", "30s")
        finally:
            stop.set()
            await sampler
        assert drained.exit_code == 0, drained.stderr
        assert "waiting for a disruption budget: projectset web" in drained.stdout
        assert fewest >= 2  # never more than one replica unavailable
        projects = [p for p in (await client.projects.list()).items if owning_set(p) == "web"]
        assert {p.status.node_ref for p in projects} == {"n2"} and all(p.status.phase == v1.RUNNING for p in projects)
