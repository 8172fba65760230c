"""Agent registration: the Node status it writes (pure part, fake clock)."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.agent.config import AgentConfig
from caravanserai.agent.docker.records import DaemonInfo
from caravanserai.agent.host.machine import Capacity, MachineFacts
from caravanserai.agent.node import NodeRegistrar
from caravanserai.client import Client
from caravanserai.clock import seconds
from caravanserai.testing import FakeClock


async def no_docker() -> DaemonInfo:
    return DaemonInfo()


def registrar(client: Client, clock: FakeClock) -> NodeRegistrar:
    config = AgentConfig(server="127.0.0.1:1", node_name="n1", reserved_cpu="1", reserved_memory="1Gi")
    return NodeRegistrar(client, config, docker_info=no_docker, clock=clock, agent_port=7421)


async def test_desired_status_reports_facts_and_keeps_the_rest() -> None:
    clock = FakeClock()
    facts = MachineFacts(
        capacity=Capacity(cpu_millis=4000, memory_bytes=8 * 2**30, disk_bytes=2**40),
        node_info=v1.NodeInfo(docker_version="20.10", kernel_version="6.1"),
        addresses=(v1.NodeAddress(type="InternalIP", address="10.0.0.9"),),
    )
    current = v1.NodeStatus(state=v1.NODE_NOT_READY)
    current.network.throughput.download = "12.5M"
    meta.set_condition(current.conditions, v1.CONDITION_DISK_PRESSURE, v1.FALSE, reason="Fine", now=1.0)
    meta.set_condition(current.conditions, v1.CONDITION_READY, v1.FALSE, reason="HeartbeatTimeout", now=1.0)

    async with Client("127.0.0.1:1") as client:  # never called: desired_status is pure
        status = registrar(client, clock).desired_status(current, facts)

    assert status.state == v1.NODE_READY
    assert dict(status.capacity) == {"cpu": "4", "memory": "8Gi", "disk": "1Ti"}
    assert dict(status.allocatable) == {"cpu": "3", "memory": "7Gi", "disk": "1Ti"}
    assert status.node_info.docker_version == "20.10"
    assert [(a.type, a.address) for a in status.network.addresses] == [("InternalIP", "10.0.0.9")]
    assert status.network.agent_port == 7421
    assert status.network.throughput.download == "12.5M"  # a measurement is not lost by registering again
    ready = meta.get_condition(status.conditions, v1.CONDITION_READY)
    assert ready is not None and (ready.status, ready.reason) == (v1.TRUE, "AgentReady")
    assert seconds(ready.last_transition_time) == clock.now()
    assert meta.get_condition(status.conditions, v1.CONDITION_DISK_PRESSURE) is not None
    assert current.state == v1.NODE_NOT_READY  # the input is not modified
