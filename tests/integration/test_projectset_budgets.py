"""Disruption budgets against a real apiserver, the ProjectSet controller and simulated agents: `caractrl drain`
moves a set's replicas one budget at a time, waiting for each replacement to be available elsewhere; the dashboard's
drain moves what the budgets allow in one pass and names what they hold."""

from __future__ import annotations

import asyncio

from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)
from cluster_sim import add_node
from replica_sim import simulated_agents
from test_dashboard import send
from test_projectset_rollouts import controllers, projectset, status_is

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.client.nodeops import set_unschedulable
from caravanserai.clock import SystemClock
from caravanserai.project.replicas import availability, owning_set
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for
from support.dashboard import dashboard

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


async def test_the_dashboards_drain_moves_within_budgets_and_names_what_they_hold(
    api: RunningApiServer, client: Client
) -> None:
    await add_node(client, "n1")
    await add_node(client, "n2", unschedulable=True)
    await client.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name="team-a")))
    async with controllers(client), simulated_agents(client, ["n1", "n2"]), dashboard(api.address) as dash:
        obj = projectset(replicas=3, min_ready_seconds=1)
        obj.spec.disruption_budget.max_unavailable = "1"
        await client.projectsets.create(obj)
        loner = await client.projects.create(project("solo", namespace="team-a"))  # no set: moved at once
        await wait_for(lambda: status_is(client, lambda s: s.available_replicas == 3), 15)
        await wait_for(lambda: phase_is(client, meta.key_of(loner), v1.RUNNING), 15)
        await set_unschedulable(client, "n2", False)
        status, answer = await send(dash, "POST", "/api/v1/nodes/n1/drain")
        assert status == 200 and answer["drained"] is False
        replicas = {p.metadata.name for p in (await client.projects.list()).items if owning_set(p) == "web"}
        moved_replicas = set(answer["moved"]) - {"team-a/solo"}
        assert "team-a/solo" in answer["moved"] and moved_replicas and answer["held"]  # a name in team-a, as shown
        assert moved_replicas | set(answer["held"]) == replicas and not moved_replicas & set(answer["held"])
        assert all(why.startswith("projectset web") for why in answer["held"].values()), answer["held"]
        assert await available_now(client) >= 2  # the held replicas still run on n1
        solo = await client.projects.get("team-a/solo")
        assert solo.status.phase in (v1.PENDING, v1.SCHEDULED, v1.RUNNING) and solo.status.previous_node_ref == "n1"


async def phase_is(client: Client, key: str, phase: str) -> bool:
    return (await client.projects.get(key)).status.phase == phase
