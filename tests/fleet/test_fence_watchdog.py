"""The node's fence watchdog: an agent frozen (SIGSTOP) or killed for longer than it takes node health to move its
project cannot fence itself, so the host's `cara-fence-watchdog` stops the old copy by the agent's recorded
deadline, before the move: measured from the engines' own start and finish times, the two copies never run at
once. When the agent comes back it keeps the stale copy stopped and removes it. (Without the watchdog the old copy
runs until the agent is back: the whole freeze past the move.)"""

from __future__ import annotations

import asyncio

import pytest
from fleet_helpers import GRACE_PERIOD, HEARTBEAT_TIMEOUT, QUICK_STOP, container_times, copies, wait_running

from caravanserai import v1
from caravanserai.testing import builders
from caravanserai.testing.wait import wait_for
from support.fleet import Fleet

MAX_OVERLAP = 1.0
"""Seconds: the old copy stops before the deadline, the move comes after it; this is Docker's and the sampling's
latency only."""
PAST_THE_MOVE = 5.0
"""Seconds the agent stays silent once the project runs elsewhere."""


@pytest.mark.parametrize("silence", ["frozen", "killed"])
async def test_a_silent_agents_copy_is_stopped_before_the_moved_one_starts(fleet: Fleet, silence: str) -> None:
    name = f"silent-{silence}"
    async with fleet.client(timeout=5, retry_timeout=30) as client:
        await client.projects.create(
            builders.project(name, image=fleet.config.image, command=QUICK_STOP, requests={"cpu": "800m"})
        )
        old_node = (await wait_running(client, [name]))[name]
        old_id = (await copies(fleet, name))[old_node][0].id
        agent = fleet.agents[old_node]
        if silence == "frozen":
            agent.pause()
        else:
            await agent.kill()
        try:

            async def moved() -> str | None:
                project = await client.projects.get(name)
                node = project.status.node_ref
                return node if project.status.phase == v1.RUNNING and node and node != old_node else None

            new_node = await wait_for(moved, HEARTBEAT_TIMEOUT + GRACE_PERIOD + 15, interval=0.2, message="moved")
            await asyncio.sleep(PAST_THE_MOVE)
            new_id = (await copies(fleet, name))[new_node][0].id
            new_started, _ = await container_times(fleet, new_node, new_id)
            _, old_finished = await container_times(fleet, old_node, old_id)
            assert old_finished > 0, f"the {silence} agent's copy still runs {PAST_THE_MOVE:g} s after the move"
            overlap = old_finished - new_started
            print(f"{silence} agent: overlap {overlap:.2f} s (negative: a gap)")
            assert overlap <= MAX_OVERLAP
        finally:
            agent.resume()
            await agent.start()  # the killed one: started again, as systemd would
        await wait_for(lambda: _gone(fleet, old_node, old_id), 30, interval=0.3, message="stale copy removed")
        for _ in range(10):  # the agent back never starts the stale copy again
            assert list(await copies(fleet, name)) == [new_node]
            await asyncio.sleep(0.3)


async def _gone(fleet: Fleet, host: str, container_id: str) -> bool:
    return not await fleet.dockers[host].containers(f"id={container_id}")
