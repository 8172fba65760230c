"""Self-fencing: a partitioned agent stops its copies at `--fence-after` (the moment the control plane moves them),
so two copies overlap for at most a few seconds even while the partition lasts; copies still bound to it when it
comes back are started again."""

from __future__ import annotations

import asyncio
import time

from fleet_helpers import GRACE_PERIOD, HEARTBEAT_TIMEOUT, QUICK_STOP, container_times, copies, wait_running

from caravanserai import v1
from caravanserai.agent.fencing.stops import LEAD_MARGIN
from caravanserai.clock import seconds
from caravanserai.testing import builders
from caravanserai.testing.wait import wait_for
from support.fleet import Fleet

MAX_OVERLAP = 3.0


async def test_partitioned_agent_stops_its_copy_before_the_new_one_runs_long(fleet: Fleet) -> None:
    name = "fenced"
    async with fleet.client(timeout=5, retry_timeout=30) as client:
        await client.projects.create(
            builders.project(name, image=fleet.config.image, command=QUICK_STOP, requests={"cpu": "800m"})
        )
        old_node = (await wait_running(client, [name]))[name]
        old_id = (await copies(fleet, name))[old_node][0].id
        fleet.cut(old_node)

        async def moved() -> str | None:
            project = await client.projects.get(name)
            node = project.status.node_ref
            return node if project.status.phase == v1.RUNNING and node and node != old_node else None

        new_node = await wait_for(moved, HEARTBEAT_TIMEOUT + GRACE_PERIOD + 10, interval=0.1, message="moved")
        # The partition goes on; the old copy must be stopped (and kept) by its own agent.
        await wait_for(lambda: _stopped(fleet, old_node, old_id), 10, interval=0.2, message="old copy stopped")
        new_id = (await copies(fleet, name))[new_node][0].id
        new_started, _ = await container_times(fleet, new_node, new_id)
        _, old_finished = await container_times(fleet, old_node, old_id)
        overlap = old_finished - new_started
        print(f"self-fencing overlap (s): {overlap:.2f} (negative: a gap)")
        assert overlap <= MAX_OVERLAP
        await asyncio.sleep(2.0)
        assert list(await copies(fleet, name)) == [new_node]  # still one copy while partitioned

        fleet.heal(old_node)
        await wait_for(lambda: _gone(fleet, old_node, old_id), 30, interval=0.3, message="stale copy removed")
        assert list(await copies(fleet, name)) == [new_node]


async def test_fenced_copies_start_again_when_still_bound_on_reconnect(fleet: Fleet) -> None:
    name = "comeback"
    async with fleet.client(timeout=5, retry_timeout=30) as client:
        await client.projects.create(
            builders.project(name, image=fleet.config.image, command=QUICK_STOP, requests={"cpu": "800m"})
        )
        node = (await wait_running(client, [name]))[name]
        container = (await copies(fleet, name))[node][0].id
        for controllers in fleet.controllers:  # nothing moves the project while its host is away
            controllers.pause()
        fleet.cut(node)
        cut_at = time.monotonic()
        await wait_for(
            lambda: _stopped(fleet, node, container),
            HEARTBEAT_TIMEOUT + GRACE_PERIOD + 5,
            interval=0.2,
            message="copy stopped by the fence",
        )
        fenced_after = time.monotonic() - cut_at
        print(f"fenced {fenced_after:.1f} s after the cut (--fence-after {HEARTBEAT_TIMEOUT + GRACE_PERIOD:.0f} s)")
        # The fence starts early by the longest stop timeout (the fleet's --stop-timeout 1) plus its margin, so the
        # stop ends by --fence-after; never earlier than that.
        early = 1 + LEAD_MARGIN
        assert fenced_after >= HEARTBEAT_TIMEOUT + GRACE_PERIOD - early - fleet.config.heartbeat_interval - 1.0
        healed_at = time.time()
        fleet.heal(node)

        async def renewed() -> bool:  # the agent is back before the controllers look again
            lease = await client.leases.get(node)
            return seconds(lease.spec.renew_time) > healed_at

        await wait_for(renewed, 60, interval=0.2, message=f"{node} renews its lease after the heal")
        for controllers in fleet.controllers:
            controllers.resume()
        await wait_for(lambda: _running(fleet, node, container), 30, interval=0.3, message="copy started again")
        project = await client.projects.get(name)
        assert (project.status.phase, project.status.node_ref) == (v1.RUNNING, node)


async def _stopped(fleet: Fleet, host: str, container_id: str) -> bool:
    rows = await fleet.dockers[host].containers(f"id={container_id}")
    return len(rows) == 1 and not rows[0].running


async def _running(fleet: Fleet, host: str, container_id: str) -> bool:
    rows = await fleet.dockers[host].containers(f"id={container_id}")
    return len(rows) == 1 and rows[0].running


async def _gone(fleet: Fleet, host: str, container_id: str) -> bool:
    return not await fleet.dockers[host].containers(f"id={container_id}")
