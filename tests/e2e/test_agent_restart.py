"""The agent's restart safety against real Docker: adoption, fencing, and repairs driven by Docker events."""

from __future__ import annotations

import pytest
from agent_harness import NODE_LABEL, RunningAgent, StartAgent, bind, container_ids, docker, docker_list, wait_phase

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker


async def reconciled(agent: RunningAgent, times: int = 1) -> None:
    """Wait until the agent's controller has finished `times` reconciles (successful or requeued)."""
    assert agent.agent.controller is not None
    results = agent.agent.controller.metrics.results
    await wait_for(lambda: results["success"] + results["requeue_after"] >= times, timeout=15)


def running(name: str) -> bool:
    return docker("inspect", "-f", "{{.State.Running}}", name) == "true"


async def test_restarted_agent_adopts_its_containers(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    await client.projects.create(project("keep", image=image, services=["a", "b"]))
    await bind(client, "keep", agent.node)
    await wait_phase(client, "keep", v1.RUNNING)
    label = f"{NODE_LABEL}={agent.node}"
    before = container_ids(label)

    await agent.stop()
    assert container_ids(label) == before and all(running(name) for name in before)  # stopping keeps workloads

    again = await start_agent(node=agent.node)
    await reconciled(again)
    assert container_ids(label) == before
    p = await client.projects.get("keep")
    assert p.status.phase == v1.RUNNING
    assert {s.name: s.container_id for s in p.status.services} == {
        "a": before[f"cara_keep_a_{agent.node}"],
        "b": before[f"cara_keep_b_{agent.node}"],
    }


async def test_projects_moved_away_or_recreated_while_stopped_are_fenced(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    agent = await start_agent()
    for name in ("moved", "reborn", "stays"):
        await client.projects.create(project(name, image=image))
        await bind(client, name, agent.node)
        await wait_phase(client, name, v1.RUNNING)
    label = f"{NODE_LABEL}={agent.node}"
    before = container_ids(label)
    await agent.stop()

    # While the agent is away: "moved" goes back to Pending and onto another node (as node-health and the
    # scheduler would), "reborn" is deleted and created again under the same name (a new uid) on this node.
    moved = meta.copy(await client.projects.get("moved"))
    moved.status.node_ref = ""
    meta.set_phase(moved, v1.PENDING, reason="NodeNotReady", message="moved by the test", now=0.0)
    await client.projects.update_status(moved)
    await bind(client, "moved", "some-other-node")
    await client.projects.delete("reborn", force=True)
    await client.projects.create(project("reborn", image=image))
    await bind(client, "reborn", agent.node)

    await start_agent(node=agent.node)

    async def fenced() -> bool:
        container, network = f"cara_moved_svc0_{agent.node}", f"cara_moved_{agent.node}"
        return container not in container_ids(label) and network not in docker_list("network", label)

    await wait_for(fenced, timeout=20, message="the moved project's container and network to be removed")
    reborn = await wait_phase(client, "reborn", v1.RUNNING)
    after = container_ids(label)
    stays, reborn_name = f"cara_stays_svc0_{agent.node}", f"cara_reborn_svc0_{agent.node}"
    assert after[stays] == before[stays]
    assert after[reborn_name] != before[reborn_name]
    assert reborn.status.services[0].container_id == after[reborn_name]
    uid = docker("inspect", "-f", '{{index .Config.Labels "caravanserai.io/project-uid"}}', reborn_name)
    assert uid == reborn.metadata.uid


async def test_docker_events_update_statuses_and_repair(client: Client, start_agent: StartAgent, image: str) -> None:
    agent = await start_agent()
    looping = project("loop", image=image, command=["sh", "-c", "sleep 1; exit 1"])
    await client.projects.create(looping)
    await client.projects.create(project("heal", image=image))
    for name in ("loop", "heal"):
        await bind(client, name, agent.node)
    first = (await wait_phase(client, "heal", v1.RUNNING)).status.services[0]

    async def restarts_counted() -> bool:  # policy Always: Docker restarts it; each restart is an event
        s = (await client.projects.get("loop")).status.services[0]
        return s.restart_count >= 2

    await wait_for(restarts_counted, timeout=20, message="Docker's restarts to show in the service status")
    assert (await client.projects.get("loop")).status.phase == v1.RUNNING

    for stop in (["kill"], ["stop", "-t", "0"]):  # stopped by hand: Docker leaves it, the agent starts it again
        docker(*stop, f"cara_heal_svc0_{agent.node}")

        async def started_again() -> bool:
            return running(f"cara_heal_svc0_{agent.node}")

        await wait_for(started_again, timeout=15, message=f"the agent to start the container after docker {stop[0]}")
    p = await wait_phase(client, "heal", v1.RUNNING)
    assert p.status.services[0].container_id == first.container_id
    assert docker("inspect", "-f", "{{.State.Status}}", f"cara_heal_svc0_{agent.node}") == "running"
