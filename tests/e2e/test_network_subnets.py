"""The agent's own address space against real Docker: project and spare networks take subnets of the agent's
range (never a route of the host, never Docker's default ranges), a big project gets a bigger subnet, the spares
go on a clean stop, and two agents making networks at once on one engine never collide."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from ipaddress import IPv4Network

import pytest
from agent_harness import NODE_LABEL, StartAgent, bind, docker, docker_list, remove_node_objects, wait_phase

from caravanserai import v1
from caravanserai.agent.docker import containers, naming
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.agent.workload.subnets import AddressSpace, SubnetAllocator, host_routes
from caravanserai.client import Client
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker


def own_range() -> IPv4Network:
    """A /24 of 10.189.0.0/16 of the test's own, so that test runs sharing the engine keep apart."""
    return IPv4Network(f"10.189.{random.randrange(256)}.0/24")


def subnets_of(node: str) -> dict[str, IPv4Network]:
    """Network name → its subnet, for every network labelled for `node`."""
    names = docker_list("network", f"{NODE_LABEL}={node}")
    if not names:
        return {}
    inspected = json.loads(docker("network", "inspect", *names))
    return {n["Name"]: IPv4Network(n["IPAM"]["Config"][0]["Subnet"]) for n in inspected}


async def test_project_and_spare_networks_take_subnets_of_the_range_and_the_spares_go_on_stop(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    space = own_range()
    routes = host_routes()  # before: each network made adds the route of its own bridge
    agent = await start_agent(network_pool=2, network_range=str(space), network_prefix=29)
    await client.projects.create(project("small", image=image))
    await client.projects.create(project("big", image=image, services=6))
    for name in ("small", "big"):
        await bind(client, name, agent.node)
    for name in ("small", "big"):
        await wait_phase(client, name, v1.RUNNING, timeout=120)

    def settled() -> dict[str, IPv4Network] | None:
        found = subnets_of(agent.node)
        return found if len(found) == 4 else None  # two projects' networks and two spares

    found = await wait_for(settled, timeout=30, interval=0.3, message="two spares beside the projects' networks")
    assert all(s.subnet_of(space) and not any(s.overlaps(r) for r in routes) for s in found.values())
    listed = list(found.values())
    assert all(not a.overlaps(b) for i, a in enumerate(listed) for b in listed[i + 1 :])
    big = docker("inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}",
                 f"cara_big_svc0_{agent.node}")  # fmt: skip
    assert found[big].prefixlen == 28  # six services do not fit a /29 (five and a gateway)
    assert sorted(p.prefixlen for n, p in found.items() if n != big) == [29, 29, 29]

    in_use = {n for n in found if n == big or docker("network", "inspect", "-f", "{{len .Containers}}", n) != "0"}
    agent.agent.stop()  # as SIGTERM does
    await agent.task
    assert set(subnets_of(agent.node)) == in_use  # the spares went; the projects' networks stay with them


async def test_two_agents_making_networks_at_once_on_one_engine_never_collide(docker_engine: None) -> None:
    space = AddressSpace(own_range(), 28)
    nodes = [f"e2e-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    try:
        async with DockerRuntime.connect() as engine:
            first, second = (SubnetAllocator(engine, space, node=n) for n in nodes)
            second._start = first._start  # both search from the same subnet: every creation races the other's

            async def make(allocator: SubnetAllocator, node: str, i: int) -> None:
                name = naming.pool_network_name(f"{i:012x}", node)
                await allocator.ensure(containers.pool_network_config(name, node=node))

            await asyncio.gather(
                *(make(a, n, i) for i in range(4) for a, n in zip((first, second), nodes, strict=True))
            )
        made = [s for n in nodes for s in subnets_of(n).values()]
        assert len(made) == 8
        assert all(s.subnet_of(space.range) for s in made)
        assert all(not a.overlaps(b) for i, a in enumerate(made) for b in made[i + 1 :])
    finally:
        for node in nodes:
            await asyncio.to_thread(remove_node_objects, node)
