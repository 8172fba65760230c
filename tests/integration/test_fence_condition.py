"""The Node's FenceUnrecorded condition as the agent writes it through a real apiserver: True with the problem while
the fence deadline cannot be recorded for the watchdog, False once it can again, and no write at all for a node
that never had a problem."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.agent.config import AgentConfig
from caravanserai.agent.docker.records import DaemonInfo
from caravanserai.agent.node import REASON_FENCE_RECORDED, REASON_FENCE_UNWRITABLE, NodeRegistrar
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.testing.builders import node


async def _no_docker() -> DaemonInfo:
    return DaemonInfo()


async def test_the_condition_follows_the_record_and_is_left_out_while_all_is_well(client: Client) -> None:
    created = await client.nodes.create(node("fence-n1"))
    config = AgentConfig(server="127.0.0.1:1", node_name="fence-n1")
    registrar = NodeRegistrar(client, config, docker_info=_no_docker, clock=SystemClock(), agent_port=7421)
    unchanged = await registrar.write_fence_record("")
    assert unchanged.metadata.resource_version == created.metadata.resource_version  # nothing to say: no write
    failing = await registrar.write_fence_record("PermissionError: [Errno 13] Permission denied")
    condition = meta.get_condition(failing.status.conditions, v1.CONDITION_FENCE_UNRECORDED)
    assert condition is not None and (condition.status, condition.reason) == (v1.TRUE, REASON_FENCE_UNWRITABLE)
    assert "Permission denied" in condition.message and "nothing stops its containers" in condition.message
    again = await registrar.write_fence_record("PermissionError: [Errno 13] Permission denied")
    assert again.metadata.resource_version == failing.metadata.resource_version  # as stored: no write
    recovered = await registrar.write_fence_record("")
    condition = meta.get_condition(recovered.status.conditions, v1.CONDITION_FENCE_UNRECORDED)
    assert condition is not None and (condition.status, condition.reason) == (v1.FALSE, REASON_FENCE_RECORDED)
