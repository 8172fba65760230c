"""The three controllers in one Manager, configured by `cara-controller-manager`'s flags, working together."""

from __future__ import annotations

import asyncio
import contextlib

from cluster_sim import add_node, condition, renew, running_manager, set_phase

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controllers import manager as controller_manager
from caravanserai.errors import NotFound
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

CLOCK = SystemClock()


async def test_a_project_moves_off_a_dead_node_and_is_collected_after_deletion(client: Client) -> None:
    opts = controller_manager.parser().parse_args(
        ["--heartbeat-timeout", "1500ms", "--grace-period", "1s", "--startup-grace-period", "1s",
         "--terminated-delay", "200ms", "--no-leader-elect"]
    )  # fmt: skip
    assert opts.controllers == ["scheduler", "node-health", "gc", "placement", "projectset", "queue", "routes"]
    await add_node(client, "big", cpu="16", memory="64Gi")
    for name in ("small-1", "small-2"):
        await add_node(client, name, cpu="2", memory="4Gi")
    alive = {"big", "small-1", "small-2"}

    async def heartbeats() -> None:
        while True:
            for name in sorted(alive):
                await renew(client, name, at=CLOCK.now())
            await asyncio.sleep(0.25)

    beats = asyncio.create_task(heartbeats())
    try:
        async with running_manager(client, lambda m: controller_manager.setup(m, client, CLOCK, opts)):
            await client.projects.create(project("web", requests={"cpu": "1", "memory": "1Gi"}))

            async def bound_to() -> str:
                p = await client.projects.get("web")
                return p.status.node_ref if p.status.phase == v1.SCHEDULED else ""

            assert await wait_for(bound_to, 5) == "big"  # spread: the emptiest node
            await set_phase(client, "web", v1.RUNNING)  # as its agent would
            alive.discard("big")  # the node goes silent

            async def stamped() -> bool:
                return condition(await client.projects.get("web"), v1.CONDITION_NOT_READY_AT) is not None

            await wait_for(stamped, 5)
            moved = await wait_for(bound_to, 8)  # back to Pending after the grace, then placed again
            assert moved in ("small-1", "small-2")
            assert (await client.nodes.get("big")).status.state == v1.NODE_NOT_READY

            await set_phase(client, "web", v1.RUNNING)
            await client.projects.delete("web")  # Terminating: its new agent stops it ...
            await set_phase(client, "web", v1.TERMINATED)  # ... and reports it gone

            async def collected() -> bool:
                try:
                    await client.projects.get("web")
                except NotFound:
                    return True
                return False

            await wait_for(collected, 5)
    finally:
        beats.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beats
