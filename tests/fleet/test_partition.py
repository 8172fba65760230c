"""A partitioned host: its node goes NotReady, its projects run elsewhere within timeout + grace + 3 s, and on
heal the stale copies go and nothing runs twice. Self-fencing is off here (`--fence-after 0`), so the stale copy
runs for the whole partition: the overlap measured is what self-fencing (test_selffence) removes."""

from __future__ import annotations

import asyncio
import time

from fleet_helpers import GRACE_PERIOD, HEARTBEAT_TIMEOUT, QUICK_STOP, container_times, copies, wait_running

from caravanserai import v1
from caravanserai.testing import builders
from caravanserai.testing.wait import wait_for
from support.fleet import Fleet

FIGURES: dict[str, float] = {}


async def test_partitioned_host_loses_its_projects_and_fences_them_on_heal(fleet: Fleet) -> None:
    names = ["part-a", "part-b"]
    for host in fleet.workers:
        await fleet.restart_agent(host, "--fence-after", "0")
    await fleet.wait_nodes_ready()
    async with fleet.client(timeout=5, retry_timeout=30) as client:
        for name in names:
            await client.projects.create(
                builders.project(name, image=fleet.config.image, command=QUICK_STOP, requests={"cpu": "800m"})
            )
        placement = await wait_running(client, names)
        victim_name, victim_node = names[0], placement[names[0]]
        cut_at = time.monotonic()
        fleet.cut(victim_node)

        async def node_not_ready() -> bool:
            return (await client.nodes.get(victim_node)).status.state == v1.NODE_NOT_READY

        await wait_for(node_not_ready, HEARTBEAT_TIMEOUT + 5, interval=0.1, message=f"{victim_node} NotReady")
        FIGURES["not_ready_after"] = time.monotonic() - cut_at
        assert FIGURES["not_ready_after"] <= HEARTBEAT_TIMEOUT + fleet.config.heartbeat_interval + 1.0

        async def moved() -> str | None:
            project = await client.projects.get(victim_name)
            node = project.status.node_ref
            return node if project.status.phase == v1.RUNNING and node and node != victim_node else None

        budget = HEARTBEAT_TIMEOUT + GRACE_PERIOD + 3.0
        new_node = await wait_for(moved, budget + 2.0, interval=0.1, message=f"{victim_name} Running elsewhere")
        FIGURES["running_elsewhere_after"] = time.monotonic() - cut_at
        assert FIGURES["running_elsewhere_after"] <= budget, FIGURES
        running = await copies(fleet, victim_name)
        assert victim_node in running, "without self-fencing the partitioned copy keeps running"
        new_started, _ = await container_times(fleet, new_node, running[new_node][0].id)
        await asyncio.sleep(2.0)

        fleet.heal(victim_node)
        healed_at = time.monotonic()

        async def single_copies() -> bool:
            found = {name: await copies(fleet, name) for name in names}
            return list(found[victim_name]) == [new_node] and all(len(rows) == 1 for rows in found.values())

        await wait_for(single_copies, 30, interval=0.2, message="stale copy removed after heal")
        FIGURES["stale_copy_removed_after_heal"] = time.monotonic() - healed_at
        FIGURES["overlap_without_self_fencing"] = time.time() - new_started
        for _ in range(10):  # and it stays that way
            assert await single_copies()
            await asyncio.sleep(0.3)
    print(f"partition figures (s): {FIGURES}")
