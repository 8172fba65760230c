"""A real agent whose fence deadline cannot be written for the node's watchdog says so on its Node
(FenceUnrecorded True, with the error) and clears it once the record can be written again."""

from __future__ import annotations

from pathlib import Path

from agent_harness import StartAgent

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.testing.wait import wait_for


async def _condition(client: Client, node: str) -> v1.Condition | None:
    return meta.get_condition((await client.nodes.get(node)).status.conditions, v1.CONDITION_FENCE_UNRECORDED)


async def test_an_unwritable_fence_record_shows_on_the_node_until_it_is_writable(
    start_agent: StartAgent, client: Client, tmp_path: Path
) -> None:
    blocked = tmp_path / "fence"
    blocked.write_text("a file where the record's directory should be")
    agent = await start_agent(fence_dir=str(blocked), fence_after=30.0)
    node = agent.config.node_name

    async def says(status: str) -> bool:
        found = await _condition(client, node)
        return found is not None and found.status == status

    await wait_for(lambda: says(v1.TRUE), 10, message="FenceUnrecorded True")
    found = await _condition(client, node)
    assert found is not None and "FileExistsError" in found.message
    blocked.unlink()  # the directory can be made now: the next renewal records the deadline
    await wait_for(lambda: says(v1.FALSE), 10, message="FenceUnrecorded False")
    assert (blocked / f"{node}.deadline.json").exists()
