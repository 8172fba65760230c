"""cara-agent as a real process against real Docker, killed with SIGKILL and cut off from its API server.

* Killed mid-reconcile and restarted: it adopts what runs (same container ids, never restarted), finishes what it
  was starting, and never makes a second container for a service.
* Cut off from the API server (its own apiserver process SIGKILLed) while two agents share one Docker Engine: its
  containers keep running, its node goes NotReady, its projects move to the other node and run there; when it
  comes back it removes its stale copies within a few seconds, and only its own.
* Its apiserver gone while a project is deleted and etcd's history compacted: the agent lists again when it comes
  back and removes that project's containers, leaving the others alone.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from fault_processes import (
    NODE_LABEL,
    QUICK_STOP,
    Container,
    Processes,
    agent_argv,
    containers,
    controller_manager_argv,
    metric,
    networks,
    scrape,
    started_at,
)

from caravanserai import meta, v1
from caravanserai.agent.docker.naming import LABEL_NETWORK_POOL
from caravanserai.agent.workload.netpool import default_pool_size
from caravanserai.client import Client
from caravanserai.storage import EtcdClient, Store
from caravanserai.testing import free_port
from caravanserai.testing.apiserver import apiserver
from caravanserai.testing.builders import project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for
from support.processes import ApiProcess

pytestmark = pytest.mark.docker


async def bind(client: Client, name: str, node: str) -> v1.Project:
    """Pending → Scheduled on `node`, as the scheduler would bind it."""
    obj = meta.copy(await client.projects.get(name))
    obj.status.node_ref = node
    meta.set_phase(obj, v1.SCHEDULED, reason="Scheduled", message=f"bound to {node} by the test", now=time.time())
    return await client.projects.update_status(obj)


async def wait_running(client: Client, names: list[str], timeout: float = 30) -> None:
    async def all_running() -> bool:
        phases = [(await client.projects.get(n)).status.phase for n in names]
        return phases == [v1.RUNNING] * len(names)

    await wait_for(all_running, timeout, interval=0.2, message=f"{names} Running")


async def wait_ready(client: Client, node: str) -> None:
    async def ready() -> bool:
        return (await client.nodes.get(node)).status.state == v1.NODE_READY

    await wait_for(ready, 30, interval=0.2, message=f"node {node} Ready")


async def wait_idle(port: int, *, reconciles: int) -> None:
    """Until the agent's controller has finished at least `reconciles` reconciles and has nothing left to do."""

    async def idle() -> bool:
        m = await scrape(port)
        done = metric(m, "caravanserai_controller_reconcile_total", result="success") + metric(
            m, "caravanserai_controller_reconcile_total", result="requeue_after"
        )
        busy = metric(m, "caravanserai_workqueue_depth") + metric(m, "caravanserai_controller_active_workers")
        return done >= reconciles and busy == 0

    await wait_for(idle, 30, interval=0.2, message=f"the agent to finish {reconciles} reconciles")


def per_service(found: list[Container]) -> Counter[tuple[str, str]]:
    return Counter((c.project, c.service) for c in found)


@pytest.fixture
async def node(docker_nodes: set[str]) -> str:
    name = f"fault-{uuid.uuid4().hex[:8]}"
    docker_nodes.add(name)
    return name


@pytest.fixture
async def client(api_process: ApiProcess) -> AsyncIterator[Client]:
    async with Client(api_process.address, timeout=5, retry_timeout=10) as c:
        yield c


async def test_agent_killed_mid_reconcile_and_restarted_adopts_without_duplicates(
    api_process: ApiProcess, client: Client, processes: Processes, node: str, docker_image: str
) -> None:
    port = free_port()
    # cara-agent's default pool: what the SIGKILL must leave intact (`assert_pool_settled`).
    argv = agent_argv(api_process.address, node, metrics_port=port, network_pool=None)
    agent = await processes.start("agent", argv)
    await wait_ready(client, node)
    settled, starting = ["keep-a", "keep-b", "keep-c"], ["new-a", "new-b", "new-c"]
    for name in settled:
        await client.projects.create(project(name, image=docker_image, services=2, command=QUICK_STOP))
        await bind(client, name, node)
    await wait_running(client, settled)
    label = f"{NODE_LABEL}={node}"
    before = {c.id: c for c in await containers(label)}
    before_started = await started_at(list(before))

    # Bind three more and SIGKILL the agent as soon as the first of their containers exists: mid-reconcile.
    for name in starting:
        await client.projects.create(project(name, image=docker_image, services=2, command=QUICK_STOP))
        await bind(client, name, node)

    async def first_new_container() -> list[Container]:
        return [c for c in await containers(label) if c.project in starting]

    at_kill = await wait_for(first_new_container, 30, interval=0.02, message="a container of the second batch")
    await agent.kill()
    await asyncio.sleep(1.0)  # nothing the agent left behind stops what runs
    survivors = {c.id: c for c in await containers(label) if c.id in before}
    assert survivors.keys() == before.keys() and all(c.running for c in survivors.values())

    await agent.start()
    await wait_running(client, settled + starting)
    await wait_idle(port, reconciles=len(settled + starting))
    after = await containers(label)
    after_started = await started_at([c.id for c in after])
    print(
        f"\nagent SIGKILL: {len(at_kill)} container(s) of the second batch existed at the kill "
        f"({', '.join(f'{c.name}:{c.state}' for c in at_kill)}); after the restart {len(after)} containers for "
        f"{len(settled + starting) * 2} services"
    )
    assert per_service(after) == Counter({(p, f"svc{i}"): 1 for p in settled + starting for i in range(2)})
    assert all(c.running for c in after)
    assert {c.id: after_started[c.id] for c in after if c.id in before} == before_started  # never restarted
    for name in settled + starting:
        statuses = {s.name: s.container_id for s in (await client.projects.get(name)).status.services}
        assert statuses == {c.service: c.id for c in after if c.project == name}
    await assert_pool_settled(node, after, spare=default_pool_size(os.cpu_count() or 1))


async def assert_pool_settled(node: str, found: list[Container], *, spare: int) -> None:
    """Each project on one network of its own, and the node's other pool networks exactly `spare`: the network
    pool (cara-agent's default) lost nothing and leaked nothing across the SIGKILL."""
    by_project: dict[str, set[str]] = {}
    for c in found:
        by_project.setdefault(c.project, set()).update(c.networks.split(","))
    assert all(len(n) == 1 for n in by_project.values()), by_project
    used = [n for nets in by_project.values() for n in nets]
    assert len(used) == len(set(used)), f"a network shared by two projects: {by_project}"

    async def settled() -> bool:
        pool = await networks(f"{NODE_LABEL}={node}", f"{LABEL_NETWORK_POOL}=true")
        return set(used) <= pool and len(pool - set(used)) == spare

    await wait_for(settled, 30, interval=0.3, message=f"{spare} spare pool networks besides the {len(used)} in use")


@dataclass(frozen=True, slots=True)
class Sample:
    """Running copies of the moved projects on each node, `at` seconds after A's return."""

    at: float
    on_a: int
    on_b: int


async def sample_until_fenced(names: list[str], node_a: str, node_b: str, *, timeout: float = 30) -> list[Sample]:
    """Look at Docker every 100 ms until no container of `names` is left on A (two looks in a row)."""
    start = time.monotonic()
    samples: list[Sample] = []
    gone_in_a_row = 0
    while gone_in_a_row < 2 and time.monotonic() - start < timeout:
        found = await copies(names)
        on_a = sum(1 for c in found if c.node == node_a and c.running)
        on_b = sum(1 for c in found if c.node == node_b and c.running)
        samples.append(Sample(time.monotonic() - start, on_a, on_b))
        gone_in_a_row = 0 if any(c.node == node_a for c in found) else gone_in_a_row + 1
        await asyncio.sleep(0.1)
    return samples


async def test_agent_cut_off_its_projects_move_and_its_stale_copies_are_fenced_on_return(
    etcd: EtcdServer, api_process: ApiProcess, processes: Processes, docker_nodes: set[str], docker_image: str
) -> None:
    run = uuid.uuid4().hex[:6]
    node_a, node_b = f"fault-a-{run}", f"fault-b-{run}"
    docker_nodes.update({node_a, node_b})
    names = [f"moves-{run}-{i}" for i in range(2)]
    api_a = api_process  # agent A's own apiserver: killing it cuts A off while everything else goes on
    api_b = ApiProcess(etcd.endpoint, prefix=api_a.prefix)
    await api_b.start()
    try:
        async with Client(api_b.address, timeout=5, retry_timeout=10) as client:
            # A alone, with the scheduler and node health (small timings): the projects run on A. Then B joins.
            await processes.start("agent-a", agent_argv(api_a.address, node_a, metrics_port=free_port()))
            await wait_ready(client, node_a)
            await processes.start("controllers", controller_manager_argv(api_b.address, *FAST_NODE_HEALTH))
            for name in names:
                await client.projects.create(project(name, image=docker_image, command=QUICK_STOP))
            await wait_for(lambda: all_running_on(client, names, node_a), 30, interval=0.1, message="Running on A")
            await processes.start("agent-b", agent_argv(api_b.address, node_b, metrics_port=free_port()))
            await wait_ready(client, node_b)
            copies_a = {c.id for c in await copies(names)}

            # Cut A off: its node goes NotReady, its projects move to B after the grace period and run there,
            # while A's copies keep running: nobody can reach A to stop them, and B leaves them alone.
            await kill_apiserver(api_a)
            cut = time.monotonic()
            await wait_for(lambda: node_in(client, node_a, v1.NODE_NOT_READY), 15, interval=0.1, message="NotReady")
            not_ready_after = time.monotonic() - cut
            await wait_for(lambda: all_running_on(client, names, node_b), 30, interval=0.1, message="Running on B")
            moved_after = time.monotonic() - cut
            during = await copies(names)
            assert {c.id for c in during if c.node == node_a and c.running} == copies_a
            copies_b = {c.id for c in during if c.node == node_b and c.running}
            assert len(copies_b) == len(names)

            # A comes back: it removes its stale copies at once, and only its own.
            await api_a.start()
            samples = await sample_until_fenced(names, node_a, node_b)
            overlap = max((s.at for s in samples if s.on_a and s.on_b), default=0.0)
            print(
                f"\nagent cut off: node A NotReady {not_ready_after:.1f}s after the cut, projects Running on B "
                f"{moved_after:.1f}s after it; after A's return both copies ran for {overlap:.2f}s "
                f"({len(samples)} looks at Docker, 100 ms apart)"
            )
            after = await copies(names)
            assert not [c for c in after if c.node == node_a], "A's stale copies remain"
            assert {c.id for c in after if c.node == node_b and c.running} == copies_b
            assert all(s.on_b == len(names) for s in samples)  # B's copies ran all along
            assert overlap < 4.0
            await wait_for(lambda: node_in(client, node_a, v1.NODE_READY), 15, interval=0.1, message="A Ready")
            assert await all_running_on(client, names, node_b)
    finally:
        await api_b.stop()


FAST_NODE_HEALTH = (
    "--controllers", "scheduler,node-health", "--heartbeat-timeout", "3s", "--grace-period", "5s",
    "--startup-grace-period", "1s",
)  # fmt: skip


async def kill_apiserver(api: ApiProcess) -> None:
    api.kill()
    if api.proc is not None:
        await api.proc.wait()


async def copies(names: list[str]) -> list[Container]:
    """Every managed container of the projects `names`, on any node."""
    return [c for c in await containers("caravanserai.io/managed=true") if c.project in names]


async def node_in(client: Client, node: str, state: str) -> bool:
    return (await client.nodes.get(node)).status.state == state


async def all_running_on(client: Client, names: list[str], node: str) -> bool:
    for name in names:
        p = await client.projects.get(name)
        if p.status.node_ref != node or p.status.phase != v1.RUNNING:
            return False
    return True


async def test_agent_relists_after_compaction_and_removes_a_project_deleted_while_away(
    etcd: EtcdServer, etcd_client: EtcdClient, api_process: ApiProcess, client: Client, processes: Processes,
    node: str, docker_image: str,
) -> None:  # fmt: skip
    run = uuid.uuid4().hex[:6]
    gone, stays, added = f"gone-{run}", f"stays-{run}", f"added-{run}"
    port = free_port()
    await processes.start("agent", agent_argv(api_process.address, node, metrics_port=port))
    await wait_ready(client, node)
    for name in (gone, stays):
        await client.projects.create(project(name, image=docker_image, command=QUICK_STOP))
        await bind(client, name, node)
    await wait_running(client, [gone, stays])
    await wait_idle(port, reconciles=2)
    label = f"{NODE_LABEL}={node}"
    kept = {c.id: c for c in await containers(label) if c.project == stays}
    kept_started = await started_at(list(kept))
    before = await scrape(port)

    # The agent's apiserver dies; meanwhile, through another one, a project is deleted and one added, and etcd's
    # history is compacted: the agent cannot resume its watch and must list again.
    await kill_apiserver(api_process)
    async with apiserver(etcd.endpoint, prefix=api_process.prefix) as other, Client(other.address) as writer:
        await writer.projects.delete(gone, force=True)
        await writer.projects.create(project(added, image=docker_image, command=QUICK_STOP))
        await bind(writer, added, node)
    store = Store(etcd_client, prefix=api_process.prefix)
    await store.compact(await store.current_revision())
    await asyncio.sleep(1.0)  # several failed attempts: the agent's watch version is now far behind
    await api_process.start()

    async def gone_removed() -> bool:
        return not [c for c in await containers(label) if c.project == gone]

    await wait_for(gone_removed, 20, interval=0.1, message=f"the containers of {gone} to be removed")
    await wait_running(client, [stays, added])
    await wait_idle(port, reconciles=4)
    after = await scrape(port)

    def delta(name: str, **labels: str) -> int:
        return int(metric(after, name, **labels) - metric(before, name, **labels))

    # The informer of this node's assignments (the agent also keeps informers for the ingress routes).
    own = {"resource": "projects", "selector": f"status.nodeRef={node}"}
    deleted, adds = (delta("caravanserai_informer_events_total", type=t, **own) for t in ("DELETED", "ADDED"))
    relists = delta("caravanserai_informer_lists_total", **own)
    print(
        f"\nagent relist after compaction: deletions expected 1, delivered {deleted}; additions expected 1, "
        f"delivered {adds}; relists {relists}"
    )
    assert relists == 1 and deleted == 1 and adds == 1
    survivors = {c.id: c for c in await containers(label) if c.project == stays}
    assert survivors.keys() == kept.keys() and all(c.running for c in survivors.values())
    assert await started_at(list(survivors)) == kept_started
    assert len([c for c in await containers(label) if c.project == added and c.running]) == 1
