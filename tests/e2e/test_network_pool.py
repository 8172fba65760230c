"""The agent's warm pool of project networks against real Docker: claim and refill, give back on delete, an agent
restarted over a partly used pool, `network_pool=0` (per-project networks, as before the pool), the pool's
upkeep waiting for busy projects (on a fake clock) and resting once full, spares removed on a clean stop, what an
earlier agent left removed on start, and `cara-agent --cleanup` for a node that is gone."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from agent_harness import NODE_LABEL, StartAgent, bind, docker, docker_list, remove_node_objects, wait_phase

from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.agent.workload.netpool import MAX_DEFER, NetworkPool
from caravanserai.client import Client
from caravanserai.testing.builders import project
from caravanserai.testing.clock import FakeClock
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

POOL_LABEL = f"{naming.LABEL_NETWORK_POOL}=true"


def pool_networks(node: str) -> set[str]:
    """Names of the pool networks of `node` on Docker."""
    return {n for n in docker_list("network", f"{NODE_LABEL}={node}") if naming.is_pool_network(n, node)}


def networks_by_project(node: str) -> dict[str, set[str]]:
    """Project → the networks its containers on `node` are configured on."""
    out = docker("ps", "-a", "--filter", f"label={NODE_LABEL}={node}", "--format",
                 '{{.Label "caravanserai.io/project"}} {{.Networks}}')  # fmt: skip
    found: dict[str, set[str]] = {}
    for line in out.splitlines():
        name, _, networks = line.partition(" ")
        found.setdefault(name, set()).update(networks.split(","))
    return found


def spare_networks(node: str) -> set[str]:
    """Pool networks of `node` on which no container is configured."""
    used = set().union(*networks_by_project(node).values())
    return pool_networks(node) - used


def assert_one_project_per_network(node: str) -> None:
    users: dict[str, str] = {}
    for name, networks in networks_by_project(node).items():
        assert len(networks) == 1, f"project {name} spans networks {networks}"
        for network in networks:
            assert users.setdefault(network, name) == name, f"{network} is used by {users[network]} and {name}"


async def run_project(client: Client, name: str, node: str, image: str, services: list[str] | None = None) -> None:
    await client.projects.create(project(name, image=image, services=services or ["svc0"]))
    await bind(client, name, node)
    await wait_phase(client, name, v1.RUNNING)


async def wait_spare(node: str, count: int) -> set[str]:
    """Wait until `node` has exactly `count` spare pool networks and every other pool network is in use."""

    def settled() -> set[str] | None:
        used = set().union(*networks_by_project(node).values())
        pool = pool_networks(node)
        return pool - used if len(pool - used) == count else None

    return await wait_for(settled, timeout=20, interval=0.3, message=f"{count} spare pool networks of {node}")


async def test_a_project_takes_a_spare_network_and_the_pool_refills(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent(network_pool=2)
    ready = await wait_spare(agent.node, 2)

    await run_project(client, "shop", agent.node, image, services=["web", "db"])
    (network,) = networks_by_project(agent.node)["shop"]
    assert network in ready  # taken from the pool, not made on arrival
    web = f"cara_shop_web_{agent.node}"
    aliases = docker("inspect", "-f", f'{{{{json (index .NetworkSettings.Networks "{network}").Aliases}}}}', web)
    assert '"web"' in aliases
    assert "1 packets received" in docker("exec", web, "busybox", "ping", "-c", "1", "-W", "2", "db")  # service DNS

    refilled = await wait_spare(agent.node, 2)
    assert network not in refilled
    assert_one_project_per_network(agent.node)
    assert docker_list("network", f"{naming.LABEL_PROJECT}=shop") == []  # no per-project network was made


async def test_a_deleted_project_gives_its_network_back(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent(network_pool=1)
    await wait_spare(agent.node, 1)
    for name in ("first", "second"):
        await run_project(client, name, agent.node, image)
    used = networks_by_project(agent.node)
    await wait_spare(agent.node, 1)

    await client.projects.delete("first")
    await wait_phase(client, "first", v1.TERMINATED)
    spare = await wait_spare(agent.node, 1)  # given back, then the one spare too many removed
    assert pool_networks(agent.node) == spare | used["second"]

    await run_project(client, "third", agent.node, image)
    assert networks_by_project(agent.node)["third"] != used["second"]
    assert_one_project_per_network(agent.node)


async def test_a_restarted_agent_finds_owners_and_spares_again(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent(network_pool=2)
    await wait_spare(agent.node, 2)
    for name in ("a", "b"):
        await run_project(client, name, agent.node, image)
    before = networks_by_project(agent.node)
    await agent.stop()
    # As if the agent had been killed right after taking a network for a project it had not made containers for:
    # a pool network with no container on it.
    stray = naming.pool_network_name("0123456789ab", agent.node)
    docker("network", "create", "--label", f"{NODE_LABEL}={agent.node}", "--label", POOL_LABEL,
           "--label", f"{naming.LABEL_MANAGED}=true", stray)  # fmt: skip

    again = await start_agent(node=agent.node, network_pool=2)
    await run_project(client, "c", again.node, image)
    after = networks_by_project(again.node)
    assert after["a"] == before["a"] and after["b"] == before["b"]
    assert after["c"] not in (before["a"], before["b"])
    await wait_spare(again.node, 2)  # the stray one was spare: used or removed, never leaked
    assert_one_project_per_network(again.node)
    assert all(naming.is_pool_network(n, again.node) for n in docker_list("network", f"{NODE_LABEL}={again.node}"))


async def test_without_a_pool_each_project_gets_its_own_network_as_before(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent(network_pool=2)
    await run_project(client, "pooled", agent.node, image)
    (pooled,) = networks_by_project(agent.node)["pooled"]
    await agent.stop()

    again = await start_agent(node=agent.node, network_pool=0)
    await run_project(client, "plain", again.node, image)
    assert networks_by_project(again.node)["plain"] == {f"cara_plain_{again.node}"}
    assert networks_by_project(again.node)["pooled"] == {pooled}  # keeps the network its container is on

    async def spares_removed() -> bool:
        return pool_networks(again.node) == {pooled}

    await wait_for(spares_removed, timeout=20, interval=0.3, message="spare pool networks removed with network_pool=0")
    for name in ("plain", "pooled"):
        await client.projects.delete(name)
        await wait_phase(client, name, v1.TERMINATED)
    await wait_for(lambda: docker_list("network", f"{NODE_LABEL}={again.node}") == [], timeout=20, interval=0.3,
                   message="every network of the node removed")  # fmt: skip


async def test_pool_upkeep_waits_for_busy_projects_and_then_rests(docker_engine: None) -> None:
    node = f"e2e-{uuid.uuid4().hex[:8]}"
    clock = FakeClock()
    try:
        async with DockerRuntime.connect() as docker:
            pool = NetworkPool(docker, node=node, size=1, clock=clock)
            steps = 0
            step = pool.step

            async def counted() -> bool:
                nonlocal steps
                steps += 1
                return await step()

            pool.step = counted  # type: ignore[method-assign]  # counts the pool's steps by wrapping the method
            task = asyncio.create_task(pool.run())
            try:
                async with pool.busy():  # a project being brought up: the pool does not compete with it
                    await asyncio.sleep(1.0)
                    assert pool_networks(node) == set()
                    clock.advance(MAX_DEFER)  # ... for at most MAX_DEFER seconds
                    await wait_for(lambda: len(pool_networks(node)) == 1, timeout=10, interval=0.2)
                await wait_for(lambda: pool.spare == tuple(pool_networks(node)), timeout=5)
                await asyncio.sleep(0.2)
                resting = steps
                await asyncio.sleep(1.0)
                assert steps == resting  # a full pool waits for news; it does not spin
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
    finally:
        await asyncio.to_thread(remove_node_objects, node)


async def test_a_stopped_pool_leaves_no_network_appearing_after_it(docker_engine: None) -> None:
    node = f"e2e-{uuid.uuid4().hex[:8]}"
    try:
        async with DockerRuntime.connect() as docker:
            pool = NetworkPool(docker, node=node, size=5)
            asked: list[str] = []
            in_flight = asyncio.Event()
            ensure_network = docker.ensure_network

            async def recorded(config: Mapping[str, Any]) -> None:
                asked.append(config["Name"])
                in_flight.set()
                await ensure_network(config)

            docker.ensure_network = recorded  # type: ignore[method-assign]  # records the calls by wrapping the method
            task = asyncio.create_task(pool.run())
            await in_flight.wait()
            await asyncio.sleep(0.02)  # the request is with dockerd
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            when_stopped = pool_networks(node)
            assert when_stopped == set(asked)  # every network it asked for exists once it has stopped ...
            await asyncio.sleep(1.0)
            assert pool_networks(node) == when_stopped  # ... and none appears later
    finally:
        await asyncio.to_thread(remove_node_objects, node)


async def test_a_clean_stop_removes_the_spares_and_keeps_the_networks_in_use(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent(network_pool=2)
    await run_project(client, "kept", agent.node, image)
    await wait_spare(agent.node, 2)
    used = networks_by_project(agent.node)["kept"]

    agent.agent.stop()  # as SIGTERM does: reconciles drain, then the spares go
    await agent.task
    assert pool_networks(agent.node) == used  # the running project keeps its network (and its container)
    assert docker("inspect", "-f", "{{.State.Running}}", f"cara_kept_svc0_{agent.node}") == "true"


async def test_a_starting_agent_removes_the_networks_no_project_of_its_own_uses(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    node = f"e2e-{uuid.uuid4().hex[:8]}"
    labels = ["--label", f"{NODE_LABEL}={node}", "--label", f"{naming.LABEL_MANAGED}=true"]
    try:
        # What an agent of this node killed long ago left: three spare pool networks and the network of a project
        # that is no longer bound here.
        for token in ("0123456789a0", "0123456789a1", "0123456789a2"):
            docker("network", "create", *labels, "--label", POOL_LABEL, naming.pool_network_name(token, node))
        ghost = naming.network_name("ghost", node)
        docker("network", "create", *labels, "--label", f"{naming.LABEL_PROJECT}=ghost", ghost)

        agent = await start_agent(node=node, network_pool=1)
        await wait_spare(agent.node, 1)  # the spares beyond the pool's size are removed
        await wait_for(lambda: ghost not in docker_list("network", f"{NODE_LABEL}={node}"), timeout=20, interval=0.3,
                       message="the network of a project not bound here removed")  # fmt: skip
    finally:
        await asyncio.to_thread(remove_node_objects, node)


async def test_cleanup_removes_the_unused_networks_of_a_node_that_is_gone(image: str) -> None:
    node = f"e2e-{uuid.uuid4().hex[:8]}"
    labels = ["--label", f"{NODE_LABEL}={node}", "--label", f"{naming.LABEL_MANAGED}=true"]
    spare = naming.pool_network_name("0123456789ab", node)
    used = naming.pool_network_name("0123456789ac", node)
    project_network = naming.network_name("gone", node)
    try:
        docker("network", "create", *labels, "--label", POOL_LABEL, spare)
        docker("network", "create", *labels, "--label", POOL_LABEL, used)
        docker("network", "create", *labels, "--label", f"{naming.LABEL_PROJECT}=gone", project_network)
        docker("run", "-d", "--network", used, "--label", f"{NODE_LABEL}={node}", "--name", f"cara_left_web_{node}",
               image, "sleep", "3600")  # fmt: skip
        result = await asyncio.to_thread(
            subprocess.run,
            [str(Path(sys.executable).parent / "cara-agent"), "--node-name", node, "--cleanup"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert f"network {spare} removed" in result.stdout and f"network {project_network} removed" in result.stdout
        assert "2 network(s) of node" in result.stdout
        assert docker_list("network", f"{NODE_LABEL}={node}") == [used]  # a container is still on it
    finally:
        await asyncio.to_thread(remove_node_objects, node)
