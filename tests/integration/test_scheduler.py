"""The scheduler against a real apiserver and etcd, with simulated nodes (Node + Lease objects)."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict

import pytest
from cluster_sim import add_node, condition, events_for, renew, running_manager, set_phase

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controller import EventRecorder, LeaderElectionConfig
from caravanserai.controllers.scheduler import app
from caravanserai.controllers.scheduler.cache import ClusterState
from caravanserai.controllers.scheduler.reconciler import SchedulerConfig, SchedulerReconciler
from caravanserai.controllers.scheduler.resources import parse_resources, project_requests
from caravanserai.errors import FailedPrecondition
from caravanserai.informer import PHASE_INDEXERS, Indexer
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for
from caravanserai.workqueue import WorkQueue

CLOCK = SystemClock()


def scheduler(client: Client, **options: object):  # type: ignore[no-untyped-def]  # returns running_manager's context manager; its type is left to inference
    return running_manager(client, lambda m: app.setup(m, client, CLOCK, app.SchedulerOptions(**options)))  # type: ignore[arg-type]  # options are SchedulerOptions fields, typed object here


async def phase_of(client: Client, name: str) -> v1.Project:
    return await client.projects.get(name)


async def wait_bound(client: Client, name: str, timeout: float = 10.0) -> v1.Project:
    async def check() -> v1.Project | None:
        p = await client.projects.get(name)
        return p if p.status.phase == v1.SCHEDULED else None

    return await wait_for(check, timeout, message=f"{name} bound")


async def wait_unschedulable(client: Client, name: str, message: str | None = None) -> v1.Project:
    async def check() -> v1.Project | None:
        p = await client.projects.get(name)
        cond = condition(p, v1.CONDITION_SCHEDULED)
        if cond is None or cond.reason != "Unschedulable":
            return None
        return p if message is None or cond.message == message else None

    return await wait_for(check, 10, message=f"{name} unschedulable")


# Each case: the decoy node fails exactly one filter and would otherwise win (it is much larger, so the spread
# score prefers it); the project must land on "ok".
DECOY_CASES = {
    "unschedulable": {"unschedulable": True},
    "notready": {"state": v1.NODE_READY},  # a stale Lease (set below), whatever the state says
    "no-lease": {"renewed_at": -1},
    "selector": {"labels": {"zone": "b"}},
    "taint": {"taints": [("dedicated", "db", "NoSchedule")]},
    "taint-noexecute": {"taints": [("dedicated", "db", "NoExecute")]},
    "too-small": {"memory": "512Mi"},
    "full": {"extra": {"gpu": "1"}},  # its only gpu is taken by another project
}


@pytest.mark.parametrize("case", sorted(DECOY_CASES))
async def test_the_only_eligible_node_is_chosen(client: Client, case: str) -> None:
    decoy = {"cpu": "64", "memory": "256Gi", "labels": {"zone": "a"}, "extra": {"gpu": "2"}, **DECOY_CASES[case]}
    if case == "notready":
        decoy["renewed_at"] = CLOCK.now() - 200  # renewed longer ago than the 90 s heartbeat timeout
    await add_node(client, "decoy", **decoy)  # type: ignore[arg-type]  # the decoy's fields, typed object in DECOY_CASES
    await add_node(client, "ok", labels={"zone": "a"}, extra={"gpu": "1"})
    if case == "full":
        await client.projects.create(project("hog", requests={"gpu": "1"}))
        await set_phase(client, "hog", v1.SCHEDULED, node_ref="decoy")
        await set_phase(client, "hog", v1.RUNNING)
    await client.projects.create(
        project("web", requests={"cpu": "1", "memory": "1Gi", "gpu": "1"}, node_selector={"zone": "a"})
    )
    async with scheduler(client):
        web = await wait_bound(client, "web")
    assert web.status.node_ref == "ok"
    scheduled = condition(web, v1.CONDITION_SCHEDULED)
    phase = condition(web, v1.CONDITION_PHASE)
    assert scheduled is not None and (scheduled.status, scheduled.reason) == (v1.TRUE, "Scheduled")
    assert phase is not None and (phase.reason, phase.message) == ("Scheduled", "Bound to node ok")
    assert [e.spec.type for e in await events_for(client, "web", "Scheduled")] == ["Normal"]


async def test_unschedulable_message_then_placed_when_a_node_becomes_ready(client: Client) -> None:
    old = CLOCK.now() - 300
    await add_node(client, "n1", renewed_at=old)
    await add_node(client, "n2", renewed_at=-1)
    await add_node(client, "n3", unschedulable=True)
    await add_node(client, "n4", memory="4Gi")
    await add_node(client, "n5", memory="4Gi")
    for hog, on in (("hog4", "n4"), ("hog5", "n5")):  # n4 and n5 are full for now
        await client.projects.create(project(hog, requests={"memory": "3Gi"}))
        await set_phase(client, hog, v1.SCHEDULED, node_ref=on)
    await client.projects.create(project("big", requests={"memory": "2Gi"}))
    expected = "0/5 nodes are available: 2 NotReady, 1 unschedulable, 2 insufficient memory."
    async with scheduler(client):
        big = await wait_unschedulable(client, "big", expected)
        assert big.status.phase == v1.PENDING and not big.status.node_ref
        phase = condition(big, v1.CONDITION_PHASE)
        assert phase is not None and (phase.reason, phase.message) == ("Unschedulable", expected)
        warnings = await wait_for(lambda: events_for(client, "big", "FailedScheduling"))
        assert warnings[0].spec.type == "Warning" and warnings[0].spec.message == expected
        await asyncio.sleep(2.5)  # a few retries with the same verdict write nothing new
        assert (await client.projects.get("big")).metadata.resource_version == big.metadata.resource_version
        assert [e.spec.count for e in await events_for(client, "big", "FailedScheduling")] == [1]

        started = asyncio.get_running_loop().time()
        await renew(client, "n1", at=CLOCK.now())  # n1 is Ready again
        placed = await wait_bound(client, "big")
        assert placed.status.node_ref == "n1"
        assert asyncio.get_running_loop().time() - started < 1.0  # woken by the Lease, not by a retry timer


async def test_placed_promptly_when_headroom_appears(client: Client) -> None:
    await add_node(client, "n1", cpu="2")
    await client.projects.create(project("first", requests={"cpu": "2"}))
    async with scheduler(client):
        await wait_bound(client, "first")
        await client.projects.create(project("second", requests={"cpu": "1500m"}))
        await wait_unschedulable(client, "second", "0/1 nodes are available: 1 insufficient cpu.")
        await asyncio.sleep(1.2)  # let its retry backoff grow past the next check
        started = asyncio.get_running_loop().time()
        await client.projects.delete("first", force=True)
        second = await wait_bound(client, "second")
        assert second.status.node_ref == "n1"
        assert asyncio.get_running_loop().time() - started < 1.0


async def test_infeasible_is_told_apart(client: Client) -> None:
    await add_node(client, "n1", labels={"zone": "a"})
    await add_node(client, "n2", labels={"zone": "a"}, taints=[("dedicated", "gpu", "NoSchedule")])
    await add_node(client, "n3", labels={"zone": "b"})
    await client.projects.create(project("gpu-job", requests={"gpu": "1"}, node_selector={"zone": "a"}))
    async with scheduler(client):
        await wait_unschedulable(
            client,
            "gpu-job",
            "0/3 nodes are available: 1 insufficient gpu, 1 node selector mismatch, 1 untolerated taint dedicated. "
            "No node can ever fit this project (infeasible).",
        )


async def test_higher_priority_is_placed_first(client: Client) -> None:
    await add_node(client, "n1", cpu="2", renewed_at=-1)  # not Ready yet: everything waits
    priorities = {"p-a": 0, "p-b": 5, "p-c": 1, "p-d": 9, "p-e": 3, "p-f": 7, "p-g": -2}
    for name, priority in priorities.items():
        await client.projects.create(project(name, requests={"cpu": "1"}, priority=priority))
    async with scheduler(client):
        for name in priorities:
            await wait_unschedulable(client, name)
        await renew(client, "n1", at=CLOCK.now())

        async def two_bound() -> list[str] | None:
            items = (await client.projects.list()).items
            bound = sorted(p.metadata.name for p in items if p.status.phase == v1.SCHEDULED)
            return bound if len(bound) == 2 else None

        assert await wait_for(two_bound) == ["p-d", "p-f"]
        await asyncio.sleep(0.5)
        assert await two_bound() == ["p-d", "p-f"]


async def test_a_burst_never_overcommits(client: Client) -> None:
    rng = random.Random(7)
    for i in range(12):
        await add_node(client, f"node-{i:02d}", cpu=rng.choice(["2", "4", "8"]), memory=rng.choice(["4Gi", "8Gi"]))
    sizes = [
        {"cpu": rng.choice(["100m", "250m", "500m", "1"]), "memory": rng.choice(["128Mi", "256Mi", "1Gi"])}
        for _ in range(500)
    ]
    async with scheduler(client):
        sem = asyncio.Semaphore(64)

        async def create(i: int) -> None:
            async with sem:
                await client.projects.create(project(f"burst-{i:03d}", requests=sizes[i]))

        await asyncio.gather(*(create(i) for i in range(500)))

        async def settled() -> list[v1.Project] | None:
            items = (await client.projects.list()).items
            done = [
                p
                for p in items
                if p.status.phase == v1.SCHEDULED
                or (condition(p, v1.CONDITION_SCHEDULED) is not None and p.status.phase == v1.PENDING)
            ]
            return items if len(done) == 500 else None

        projects = await wait_for(settled, 30, interval=0.25)
    nodes = {n.metadata.name: parse_resources(n.status.allocatable) for n in (await client.nodes.list()).items}
    used: dict[str, dict[str, int]] = defaultdict(dict)
    pending = []
    for p in projects:
        if p.status.phase == v1.SCHEDULED:
            for resource, amount in project_requests(p).items():
                used[p.status.node_ref][resource] = used[p.status.node_ref].get(resource, 0) + amount
        else:
            cond = condition(p, v1.CONDITION_SCHEDULED)
            assert cond is not None and cond.reason == "Unschedulable"
            assert cond.message.startswith("0/12 nodes are available: ")
            pending.append(p)
    for name, amounts in used.items():
        for resource, amount in amounts.items():
            assert amount <= nodes[name][resource], (name, resource, amount, nodes[name][resource])
    assert 0 < len(pending) < 450  # the burst asked for more than the cluster has
    # nothing was freed during the burst, so a project left Pending fits on no node now either
    for p in pending:
        wanted = project_requests(p)
        for name, allocatable in nodes.items():
            free = {r: allocatable.get(r, 0) - used[name].get(r, 0) for r in wanted}
            assert any(free[r] < amount for r, amount in wanted.items()), (p.metadata.name, name)


async def test_only_the_leader_binds(client: Client) -> None:
    def replica(identity: str):  # type: ignore[no-untyped-def]  # returns running_manager's context manager; its type is left to inference
        election = LeaderElectionConfig(
            name="test-scheduler", identity=identity, lease_duration=3.0, renew_deadline=2.0, retry_period=0.25
        )
        return running_manager(
            client,
            lambda m: app.setup(m, client, CLOCK, app.SchedulerOptions(identity=identity)),
            leader_election=election,
        )

    await add_node(client, "n1", cpu="64", memory="64Gi")
    async with replica("replica-a") as (manager_a, a):
        await wait_for(lambda: manager_a.leading, 10)
        async with replica("replica-b") as (manager_b, b):
            await asyncio.sleep(0.5)
            assert not manager_b.leading
            for i in range(10):
                await client.projects.create(project(f"first-{i}", requests={"cpu": "100m"}))
            for i in range(10):
                await wait_bound(client, f"first-{i}")
            assert (a.reconciler.bound, b.reconciler.bound) == (10, 0)
            manager_a.stop()  # a clean stop releases the lease: B takes over at once
            await wait_for(lambda: manager_b.leading, 10)
            assert not manager_a.leading
            for i in range(10):
                await client.projects.create(project(f"second-{i}", requests={"cpu": "100m"}))
            for i in range(10):
                await wait_bound(client, f"second-{i}")
            assert (a.reconciler.bound, b.reconciler.bound) == (10, 10)
    hosts = {
        e.spec.involved_object.name: e.spec.source.host
        for e in (await client.events.list()).items
        if e.spec.reason == "Scheduled"
    }
    assert {hosts[f"first-{i}"] for i in range(10)} == {"replica-a"}
    assert {hosts[f"second-{i}"] for i in range(10)} == {"replica-b"}


async def test_a_conflicting_bind_is_decided_again_on_fresh_state(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    await add_node(client, "n1")
    real_update_status = client.projects.update_status
    interfered: list[str] = []

    async def someone_writes_first(obj: v1.Project) -> v1.Project:
        if obj.status.phase == v1.SCHEDULED and not interfered:
            current = await client.projects.get(obj.metadata.name)
            current.metadata.labels["touched"] = "yes"
            interfered.append((await client.projects.update(current)).metadata.resource_version)
        return await real_update_status(obj)  # the first bind now names a stale version: Conflict

    monkeypatch.setattr(client.projects, "update_status", someone_writes_first)
    await client.projects.create(project("web", requests={"cpu": "1"}))
    async with scheduler(client) as (_, parts):
        web = await wait_bound(client, "web")
        assert web.metadata.labels["touched"] == "yes" and len(interfered) == 1
        await wait_for(lambda: parts.state.assumed_count == 0, 5)
        assert parts.state.requested("n1") == {"cpu": 1000}  # counted once
        assert parts.reconciler.bound == 1


async def test_a_pending_project_being_deleted_is_not_scheduled(client: Client) -> None:
    await add_node(client, "ok")
    held = project("held")
    held.metadata.finalizers.append("example.com/backup")
    await client.projects.create(held)
    await client.projects.delete("held")  # deletion requested; the finalizer keeps the record, Pending
    await client.projects.create(project("free"))
    async with scheduler(client):
        await wait_bound(client, "free")
        await asyncio.sleep(0.5)  # a decision for "held" would have been made alongside "free"
        still = await client.projects.get("held")
    assert still.status.phase == v1.PENDING and not still.status.node_ref
    assert await events_for(client, "held", "FailedScheduling") == []


async def test_pipelined_binds_never_overcommit(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Binds are held in flight until every one the cluster has room for was decided: the decisions went on while
    earlier binds were in flight (all six were in flight at once), and each saw the resources of the binds before
    it taken, so no node got more than it has, and the rest were told why they wait."""
    for i in range(3):
        await add_node(client, f"n{i}", cpu="1")
    real_update_status = client.projects.update_status
    in_flight: list[str] = []
    most_in_flight = 0
    room_left = asyncio.Event()

    async def slow_bind(obj: v1.Project) -> v1.Project:
        nonlocal most_in_flight
        if obj.status.phase != v1.SCHEDULED:
            return await real_update_status(obj)
        in_flight.append(obj.metadata.name)
        most_in_flight = max(most_in_flight, len(in_flight))
        if len(in_flight) == 6:
            room_left.set()
        await asyncio.wait_for(room_left.wait(), 10)
        try:
            return await real_update_status(obj)
        finally:
            in_flight.remove(obj.metadata.name)

    monkeypatch.setattr(client.projects, "update_status", slow_bind)
    for i in range(20):
        await client.projects.create(project(f"p{i:02d}", requests={"cpu": "500m"}))
    async with scheduler(client) as (_, parts):
        await wait_for(lambda: room_left.is_set() or None, 10)
        assert all(parts.state.requested(f"n{i}") == {"cpu": 1000} for i in range(3))

        async def settled() -> list[v1.Project] | None:
            items = (await client.projects.list()).items
            waiting = [p for p in items if p.status.phase == v1.PENDING]
            told = [p for p in waiting if condition(p, v1.CONDITION_SCHEDULED) is not None]
            return items if len(items) - len(waiting) == 6 and len(told) == 14 else None

        projects = await wait_for(settled, 15, interval=0.2)
        assert parts.reconciler.bound == 6
    assert most_in_flight == 6
    per_node: dict[str, int] = defaultdict(int)
    for p in projects:
        if p.status.phase == v1.SCHEDULED:
            per_node[p.status.node_ref] += 1
        else:
            cond = condition(p, v1.CONDITION_SCHEDULED)
            assert cond is not None and cond.message == "0/3 nodes are available: 3 insufficient cpu."
    assert per_node == {"n0": 2, "n1": 2, "n2": 2}


async def test_a_refused_bind_frees_its_node_at_once_and_is_retried_after_the_backoff(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    await add_node(client, "n1", cpu="1")
    real_update_status = client.projects.update_status
    refused: list[dict[str, int]] = []

    async def refuse_once(obj: v1.Project) -> v1.Project:
        if obj.status.phase == v1.SCHEDULED and not refused:
            refused.append(parts.state.requested("n1"))  # the assumption counts while the bind is in flight
            raise FailedPrecondition("refused by the test")
        return await real_update_status(obj)

    monkeypatch.setattr(client.projects, "update_status", refuse_once)
    await client.projects.create(project("web", requests={"cpu": "1"}))
    config = SchedulerConfig(initial_backoff=2.0)
    async with scheduler(client, config=config) as (_, parts):
        await wait_for(lambda: bool(refused), 5)
        assert refused == [{"cpu": 1000}]
        # nothing was written: the node's share is free again at once, and the project waits for its backoff
        assert parts.state.assumed_count == 0 and parts.state.requested("n1") == {}
        assert parts.reconciler.backoff.failures("default/web") == 1
        assert (await client.projects.get("web")).status.phase == v1.PENDING
        web = await wait_bound(client, "web")
        assert web.status.node_ref == "n1"
        await wait_for(lambda: parts.state.assumed_count == 0, 5)
        assert parts.state.requested("n1") == {"cpu": 1000}


async def test_a_replica_past_its_renew_deadline_decides_nothing(client: Client) -> None:
    """A replica that wakes from a pause longer than its renew deadline still has work queued and a cache that may
    be behind the next leader's binds: it must not bind from it, whatever order its tasks resume in."""
    await add_node(client, "n1")
    late = await client.projects.create(project("late", requests={"cpu": "100m"}))
    cache: Indexer[v1.Project] = Indexer(PHASE_INDEXERS)
    cache.upsert("default/late", late)
    state = ClusterState()
    state.upsert_node(await client.nodes.get("n1"))
    state.set_lease(await client.leases.get("n1"))
    leading = False
    reconciler = SchedulerReconciler(
        client,
        cache,
        state,
        WorkQueue(clock=CLOCK),
        EventRecorder(client, component="test-scheduler", clock=CLOCK),
        clock=CLOCK,
        leading=lambda: leading,
    )
    reconciler.wake(late)
    await reconciler.reconcile("default/late")
    stored = await client.projects.get("late")
    assert stored.status.phase == v1.PENDING and not stored.status.node_ref and reconciler.bound == 0
    assert not state.is_assumed("default/late") and state.requested("n1") == {}  # nothing counted either

    leading = True  # renewed: the same replica decides again
    reconciler.wake(late)
    await reconciler.reconcile("default/late")
    assert (await client.projects.get("late")).status.node_ref == "n1" and reconciler.bound == 1
