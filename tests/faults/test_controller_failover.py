"""Two cara-scheduler processes with leader election, each through its own apiserver, and three faults in the middle
of binding:

1. the leader SIGKILLed (then started again, as a standby);
2. the next leader SIGSTOPped, and resumed once the other replica leads and binds;
3. the leader SIGSTOPped together with its apiserver, binds in flight inside it, while half the nodes are
   cordoned; the other replica takes over and binds the backlog on the other nodes; then the apiserver resumes
   and hands the deposed leader's late binds, decided on old versions, to etcd: every one must be refused.

The test simulates the cluster itself (Nodes and their Leases, renewed by the test through a third apiserver) and
watches every project change from the start with a raw watch, so it sees each binding as it is stored, whoever
wrote it. The scheduler must converge from the current state (the cluster full, every other project Pending with
reason Unschedulable); no project may ever be bound twice or to two nodes, and no node may be overcommitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest
from fault_processes import OsProcess, Processes, scheduler_argv

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.client.apply import modify
from caravanserai.clock import timestamp
from caravanserai.errors import Conflict
from caravanserai.testing.builders import lease, node, node_status, project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for
from support.processes import ApiProcess

NODES = 10
SLOTS_PER_NODE = 20  # 2 cpu / 100m each
FEASIBLE = 240  # 40 more than fit
BURST = 60  # projects created at once, every BURST_EVERY seconds
BURST_EVERY = 1.0
INFEASIBLE = 4  # ask for a label no node has
LEASE = "cara-scheduler"


@dataclass
class BindingLog:
    """What a raw watch of every project saw: each stored version's node_ref, in order, per project."""

    node_refs: dict[str, list[str]] = field(default_factory=dict)
    last_version: dict[str, str] = field(default_factory=dict)
    events: int = 0

    def record(self, obj: v1.Project) -> None:
        name = obj.metadata.name
        self.events += 1
        self.node_refs.setdefault(name, []).append(obj.status.node_ref)
        self.last_version[name] = obj.metadata.resource_version

    def binds(self, name: str) -> int:
        """How many times the project went from no node to a node."""
        refs = ["", *self.node_refs.get(name, [])]
        return sum(1 for before, after in itertools.pairwise(refs) if not before and after)

    def moves(self, name: str) -> list[tuple[str, str]]:
        """Changes from one node straight to another (never allowed: only through Pending)."""
        refs = self.node_refs.get(name, [])
        return [(a, b) for a, b in itertools.pairwise(refs) if a and b and a != b]

    @property
    def bound(self) -> int:
        return sum(1 for refs in self.node_refs.values() if refs[-1])


@dataclass
class Replica:
    """A scheduler process and the apiserver it talks to."""

    process: OsProcess
    api: ApiProcess


async def watch_projects(client: Client, log: BindingLog) -> None:
    start = (await client.projects.list()).resource_version
    async for event in client.projects.watch(resource_version=start):
        if event.type != v1.BOOKMARK:
            log.record(event.object)


async def simulated_nodes(client: Client, names: list[str]) -> None:
    for name in names:
        created = await client.nodes.create(node(name))
        await client.nodes.update_status(node_status(created, cpu="2", memory="8Gi"))
        beat = lease(name)
        beat.spec.renew_time.CopyFrom(timestamp(time.time()))
        await client.leases.create(beat)


async def renew_leases(client: Client, names: list[str]) -> None:
    """The agents' heartbeats: every node's Lease renewed every 0.5 s."""
    while True:
        for name in names:
            current = await client.leases.get(name)
            current.spec.renew_time.CopyFrom(timestamp(time.time()))
            with contextlib.suppress(Conflict):
                await client.leases.update(current)
        await asyncio.sleep(0.5)


async def create_projects(client: Client, names: list[str]) -> None:
    """Create the projects BURST at a time (concurrently), so that a leader taking over finds a backlog and a
    fault striking then finds decisions made and binds in flight."""
    for start in range(0, len(names), BURST):
        batch = names[start : start + BURST]
        await asyncio.gather(*(client.projects.create(project(n, requests={"cpu": "100m"})) for n in batch))
        await asyncio.sleep(BURST_EVERY)


@contextlib.asynccontextmanager
async def background(*coros: Coroutine[Any, Any, None]) -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks = [asyncio.create_task(coro) for coro in coros]
    try:
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def leader(client: Client) -> str:
    return (await client.leases.get(LEASE)).spec.holder_identity


async def leader_at(client: Client, log: BindingLog, *, bound: int) -> str:
    """The leading replica's identity, once `bound` projects are bound."""
    await wait_for(lambda: log.bound >= bound, 60, interval=0.005, message=f"{bound} projects bound")
    return await leader(client)


async def takeover(client: Client, deposed: str) -> tuple[str, float]:
    """Wait until a replica other than `deposed` holds the lease; (its identity, seconds waited)."""
    started = time.monotonic()

    async def other() -> str | None:
        holder = await leader(client)
        return holder if holder and holder != deposed else None

    holder = await wait_for(other, 15, interval=0.05, message=f"a leader other than {deposed}")
    return holder, time.monotonic() - started


async def binds_after(log: BindingLog, bound: int, more: int) -> None:
    await wait_for(lambda: log.bound >= bound + more, 30, interval=0.01, message=f"{more} binds after {bound}")


def signal_apiserver(api: ApiProcess, sig: signal.Signals) -> None:
    if api.proc is not None and api.proc.returncode is None:
        os.kill(api.proc.pid, sig)


@dataclass
class Figures:
    """What the faults found: bound count when each struck, and how long until another replica led."""

    bound_at: dict[str, int] = field(default_factory=dict)
    failover: dict[str, float] = field(default_factory=dict)
    leaders: list[str] = field(default_factory=list)


async def set_unschedulable(client: Client, names: list[str], cordoned: bool) -> None:
    def cordon(current: v1.Node) -> bool:
        current.spec.unschedulable = cordoned
        return True

    for name in names:
        await modify(client.nodes, name, cordon)


async def inject_faults(
    client: Client, log: BindingLog, replicas: dict[str, Replica], nodes: list[str], first: str
) -> Figures:
    """The three faults, each while the leader has a backlog to bind; returns the figures."""
    figures = Figures(leaders=[first])
    # 1. SIGKILL the leader; the standby takes over; the dead one is started again and waits as a standby.
    assert await leader_at(client, log, bound=30) == first
    await replicas[first].process.kill()
    figures.bound_at["SIGKILL"] = log.bound
    second, figures.failover["SIGKILL"] = await takeover(client, first)
    await replicas[first].process.start()
    # 2. SIGSTOP the new leader (a paused process still believes it leads); the restarted replica takes over;
    #    SIGCONT once that one has bound more: the paused one wakes up with decisions made on an old state.
    assert await leader_at(client, log, bound=90) == second
    replicas[second].process.signal(signal.SIGSTOP)
    figures.bound_at["SIGSTOP"] = log.bound
    third, figures.failover["SIGSTOP"] = await takeover(client, second)
    await binds_after(log, figures.bound_at["SIGSTOP"], 10)
    replicas[second].process.signal(signal.SIGCONT)
    # 3. Freeze the leader together with its apiserver (SIGSTOP both: a zone cut off with binds in flight) and
    #    cordon half the nodes, so that the other replica, taking over through its own apiserver, binds the
    #    backlog elsewhere than the frozen leader decided. Then the frozen apiserver resumes first and carries out
    #    the deposed leader's binds, decided on old versions: they must all be refused. Then the leader resumes.
    assert await leader_at(client, log, bound=150) == third
    replicas[third].process.signal(signal.SIGSTOP)
    signal_apiserver(replicas[third].api, signal.SIGSTOP)
    figures.bound_at["leader+apiserver SIGSTOP"] = log.bound
    await set_unschedulable(client, nodes[: len(nodes) // 2], True)
    fourth, figures.failover["leader+apiserver SIGSTOP"] = await takeover(client, third)
    await binds_after(log, figures.bound_at["leader+apiserver SIGSTOP"], 10)
    signal_apiserver(replicas[third].api, signal.SIGCONT)
    await asyncio.sleep(1.0)  # the late binds reach etcd now
    replicas[third].process.signal(signal.SIGCONT)
    await set_unschedulable(client, nodes[: len(nodes) // 2], False)
    figures.leaders += [second, third, fourth]
    return figures


async def converged(client: Client, names: list[str]) -> list[v1.Project] | None:
    """All projects, once the cluster is full and each is bound or Pending with the scheduler's reason
    (Unschedulable); else None."""
    projects = (await client.projects.list()).items
    if sorted(p.metadata.name for p in projects) != sorted(names):
        return None
    if sum(1 for p in projects if p.status.node_ref) < NODES * SLOTS_PER_NODE:
        return None
    for p in projects:
        if p.status.node_ref:
            continue
        scheduled = meta.get_condition(p.status.conditions, v1.CONDITION_SCHEDULED)
        if p.status.phase != v1.PENDING or scheduled is None or scheduled.reason != "Unschedulable":
            return None
    return projects


@pytest.fixture
async def apiservers(etcd: EtcdServer, api_process: ApiProcess) -> AsyncIterator[list[ApiProcess]]:
    """Three apiserver processes over the same data: one per scheduler replica, one for the test."""
    others = [ApiProcess(etcd.endpoint, prefix=api_process.prefix) for _ in range(2)]
    try:
        for api in others:
            await api.start()
        yield [api_process, *others]
    finally:
        for api in [api_process, *others]:
            signal_apiserver(api, signal.SIGCONT)
        await asyncio.gather(*(api.stop() for api in others))


async def test_scheduler_failovers_mid_binding_never_bind_a_project_twice(
    apiservers: list[ApiProcess], processes: Processes
) -> None:
    api_a, api_b, api_test = apiservers
    nodes = [f"sim-{i}" for i in range(NODES)]
    feasible = [f"p-{i:03d}" for i in range(FEASIBLE)]
    infeasible = [f"never-{i}" for i in range(INFEASIBLE)]
    log = BindingLog()
    async with Client(api_test.address, timeout=5, retry_timeout=10) as client:
        await simulated_nodes(client, nodes)
        run = uuid.uuid4().hex[:4]
        replicas: dict[str, Replica] = {}
        for identity, api in ((f"sched-a-{run}", api_a), (f"sched-b-{run}", api_b)):
            argv = scheduler_argv(api.address, identity, "--heartbeat-timeout", "3s")
            replicas[identity] = Replica(await processes.start(identity, argv), api)
        async with background(watch_projects(client, log), renew_leases(client, nodes)):
            first = await wait_for(lambda: leader(client), 20, interval=0.1, message="a leader")
            for name in infeasible:
                never = project(name, requests={"cpu": "100m"}, node_selector={"disk": "none"})
                await client.projects.create(never)
            async with background(create_projects(client, feasible)):
                figures = await inject_faults(client, log, replicas, nodes, first)
            final = await wait_for(
                lambda: converged(client, feasible + infeasible), 30, interval=0.2, message="every project decided"
            )

            async def watch_caught_up() -> list[v1.Project] | None:
                """The stored projects, once the watch has seen each one's current version (read afresh on every
                poll: a late status write after convergence is a new version the watch must also see)."""
                stored = (await client.projects.list()).items
                seen = all(log.last_version.get(p.metadata.name) == p.metadata.resource_version for p in stored)
                return stored if seen else None

            final = await wait_for(
                watch_caught_up, 10, interval=0.2, message="the watch to have seen every stored version"
            )
            final_leader = await leader(client)
        events = (await client.events.list()).items
    scheduled_by = Counter(e.spec.source.host for e in events if e.spec.reason == "Scheduled")

    per_project = {name: log.binds(name) for name in feasible + infeasible}
    bound = [p for p in final if p.status.node_ref]
    load = Counter(p.status.node_ref for p in bound)
    faults = ", ".join(
        f"{fault} at {at} bound ({figures.failover[fault]:.2f}s to a new leader)"
        for fault, at in figures.bound_at.items()
    )
    print(
        f"\nscheduler failover: {len(per_project)} projects, {log.events} watch events (the last stored version of "
        f"every project seen); leaders {' -> '.join(figures.leaders)}; {faults}; bindings observed "
        f"{sum(per_project.values())} for {len(bound)} bound projects, at most {max(per_project.values())} per "
        f"project; Scheduled events by replica {dict(scheduled_by)}"
    )
    assert all(at < NODES * SLOTS_PER_NODE for at in figures.bound_at.values())  # every fault struck mid-work
    assert final_leader == figures.leaders[-1]  # neither deposed replica took the lease back
    assert all(not log.moves(name) for name in per_project), "a node_ref changed from one node to another"
    assert max(per_project.values()) == 1, {n: c for n, c in per_project.items() if c > 1}
    assert sum(per_project.values()) == len(bound)
    assert len(bound) == NODES * SLOTS_PER_NODE  # the cluster is full ...
    assert max(load.values()) <= SLOTS_PER_NODE  # ... and no node is overcommitted
    assert all(per_project[name] == 0 for name in infeasible)
    assert len(scheduled_by) == 2  # bindings came from both replicas
