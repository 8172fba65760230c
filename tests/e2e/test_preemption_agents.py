"""Preemption end to end: two real agents, each filled by a low-priority project; a high-priority project that
fits nowhere evicts the newest of them (Preempted condition naming it), runs in its room, and the victim goes
back to Pending until the room frees again (the preemptor deleted), then runs with `Preempted` False."""

from __future__ import annotations

import uuid

import pytest
from agent_harness import StartAgent, wait_phase
from test_affinity_agents import scheduler

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.project import lifecycle
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for
from caravanserai.text.quantity import cpu_millis

pytestmark = pytest.mark.docker


async def preempted(client: Client, name: str) -> v1.Condition | None:
    """The victim's Preempted condition once it is back to Pending with it True."""
    p = await client.projects.get(name)
    cond = meta.get_condition(p.status.conditions, v1.CONDITION_PREEMPTED)
    return cond if p.status.phase == v1.PENDING and cond is not None and cond.status == v1.TRUE else None


async def test_a_high_priority_project_evicts_a_low_one_which_runs_again_when_room_frees(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    hosts = [f"pre-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    for host in hosts:
        await start_agent(node=host, hostname=host)
    cpu = min([(await client.nodes.get(h)).status.allocatable["cpu"] for h in hosts], key=cpu_millis)
    async with scheduler(client):
        for name in ("low-1", "low-2"):  # one per node: each takes a whole node's cpu
            await client.projects.create(project(name, image=image, requests={"cpu": cpu}))
            await wait_phase(client, name, v1.RUNNING, timeout=60)
        await client.projects.create(project("urgent", image=image, requests={"cpu": cpu}, priority=100))
        cond = await wait_for(lambda: preempted(client, "low-2"), timeout=60)  # the newer one goes
        assert cond.message.startswith("Preempted by project urgent")
        urgent = await wait_phase(client, "urgent", v1.RUNNING, timeout=60)
        assert urgent.status.node_ref in hosts and not urgent.status.nominated_node_name
        assert (await client.projects.get("low-1")).status.phase == v1.RUNNING  # the other one stays

        await client.projects.delete("urgent")
        again = await wait_phase(client, "low-2", v1.RUNNING, timeout=90)
        after = meta.get_condition(again.status.conditions, v1.CONDITION_PREEMPTED)
        assert after is not None and (after.status, after.reason) == (v1.FALSE, lifecycle.REASON_RESCHEDULED)
