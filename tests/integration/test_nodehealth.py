"""Node health against a real apiserver, with simulated nodes. The controller runs on a FakeClock (the Manager's
informers on real time), so heartbeat timeouts and grace periods pass without sleeping."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

import pytest
from cluster_sim import add_node, condition, events_for, renew, running_manager, set_phase

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock, seconds
from caravanserai.controllers.nodehealth import app
from caravanserai.controllers.nodehealth.policy import HealthConfig
from caravanserai.testing.builders import project
from caravanserai.testing.clock import FakeClock
from caravanserai.testing.wait import wait_for

SETTLE = 0.4  # real seconds for the controller to act on a change before asserting that nothing happened


class Cluster:
    """Simulated nodes whose Leases the test renews, on a fake clock."""

    def __init__(self, client: Client, clock: FakeClock) -> None:
        self.client = client
        self.clock = clock
        self.alive: set[str] = set()

    async def add(self, *names: str, renewed_ago: float = 0.0) -> None:
        for name in names:
            await add_node(self.client, name, renewed_at=self.clock.now() - renewed_ago)
            if renewed_ago == 0.0:
                self.alive.add(name)

    async def advance(self, seconds_: float) -> None:
        """Move time on; the live nodes renew their Leases just before it moves (they stay Ready)."""
        for name in sorted(self.alive):
            await renew(self.client, name, at=self.clock.now() + seconds_)
        await asyncio.sleep(0.05)
        self.clock.advance(seconds_)

    def kill(self, *names: str) -> None:
        self.alive.difference_update(names)

    async def revive(self, *names: str) -> None:
        for name in names:
            self.alive.add(name)
            await renew(self.client, name, at=self.clock.now())

    async def state(self, name: str) -> str:
        return (await self.client.nodes.get(name)).status.state


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cluster(client: Client, clock: FakeClock) -> Cluster:
    return Cluster(client, clock)


def health(client: Client, clock: FakeClock, **config: float):  # type: ignore[no-untyped-def]  # returns running_manager's context manager; its type is left to inference
    options = app.NodeHealthOptions(config=HealthConfig(**{"startup_grace_period": 0.0, **config}), identity="t")
    return running_manager(client, lambda m: app.setup(m, client, clock, options))


async def place(client: Client, name: str, phase: str, node: str = "n1") -> v1.Project:
    await client.projects.create(project(name))
    await set_phase(client, name, v1.SCHEDULED, node_ref=node)
    if phase in (v1.RUNNING, v1.FAILED, v1.TERMINATING):
        await set_phase(client, name, v1.RUNNING)
    if phase == v1.FAILED:
        await set_phase(client, name, v1.FAILED)
    if phase == v1.TERMINATING:
        await client.projects.delete(name)
    return await client.projects.get(name)


async def wait_phase(client: Client, name: str, phase: str, timeout: float = 5.0) -> v1.Project:
    async def check() -> v1.Project | None:
        p = await client.projects.get(name)
        return p if p.status.phase == phase else None

    return await wait_for(check, timeout, message=f"{name} {phase}")


async def wait_state(cluster: Cluster, name: str, state: str) -> None:
    async def reached() -> bool:
        return await cluster.state(name) == state

    await wait_for(reached, 5, message=f"{name} {state}")


async def test_not_ready_exactly_at_the_deadline_and_ready_again_on_renewal(
    client: Client, clock: FakeClock, cluster: Cluster
) -> None:
    await cluster.add("n1", "n2", "n3")
    t0 = clock.now()
    async with health(client, clock):
        await asyncio.sleep(SETTLE)
        cluster.kill("n1")
        await cluster.advance(89.9)
        await asyncio.sleep(SETTLE)
        assert await cluster.state("n1") == v1.NODE_READY  # never before the deadline
        await cluster.advance(0.1)
        await wait_state(cluster, "n1", v1.NODE_NOT_READY)
        n1 = await client.nodes.get("n1")
        ready = condition(n1, v1.CONDITION_READY)
        assert ready is not None and (ready.status, ready.reason) == (v1.FALSE, "HeartbeatTimeout")
        assert seconds(ready.last_transition_time) == pytest.approx(t0 + 90)
        assert [e.spec.type for e in await events_for(client, "n1", "NodeNotReady")] == ["Warning"]
        assert await cluster.state("n2") == v1.NODE_READY

        await cluster.revive("n1")
        await wait_state(cluster, "n1", v1.NODE_READY)
        ready = condition(await client.nodes.get("n1"), v1.CONDITION_READY)
        assert ready is not None and (ready.status, ready.reason) == (v1.TRUE, "HeartbeatResumed")
        assert [e.spec.type for e in await events_for(client, "n1", "NodeReady")] == ["Normal"]


async def test_real_time_detection_within_two_seconds_of_the_deadline(client: Client) -> None:
    real = SystemClock()
    for name in ("n1", "n2", "n3"):
        await add_node(client, name)

    async def keep_alive() -> None:
        while True:
            for name in ("n2", "n3"):
                await renew(client, name, at=real.now())
            await asyncio.sleep(0.3)

    options = app.NodeHealthOptions(config=HealthConfig(heartbeat_timeout=1.0, startup_grace_period=1.0))
    beats = asyncio.create_task(keep_alive())
    try:
        async with running_manager(client, lambda m: app.setup(m, client, real, options)):
            renewed = real.now()
            await renew(client, "n1", at=renewed)

            async def not_ready() -> float | None:
                n1 = await client.nodes.get("n1")
                return real.now() if n1.status.state == v1.NODE_NOT_READY else None

            seen = await wait_for(not_ready, 5, interval=0.02)
            assert 1.0 <= seen - renewed < 2.0
            assert (await client.nodes.get("n2")).status.state == v1.NODE_READY
    finally:
        beats.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beats


async def test_projects_on_a_not_ready_node(client: Client, clock: FakeClock, cluster: Cluster) -> None:
    await cluster.add("n1", "n2", "n3", "n4")
    for name, phase in (("sched", v1.SCHEDULED), ("run", v1.RUNNING), ("term", v1.TERMINATING), ("dead", v1.FAILED)):
        await place(client, name, phase)
    await place(client, "elsewhere", v1.RUNNING, node="n2")
    t0 = clock.now()
    async with health(client, clock, grace_period=180, terminating_timeout=600):
        cluster.kill("n1")
        await cluster.advance(90)
        sched = await wait_phase(client, "sched", v1.PENDING)  # Scheduled: back to Pending at once
        assert sched.status.node_ref == ""
        phase = condition(sched, v1.CONDITION_PHASE)
        assert phase is not None and phase.reason == "NodeNotReady"

        async def stamped() -> v1.Condition | None:
            return condition(await client.projects.get("run"), v1.CONDITION_NOT_READY_AT)

        stamp = await wait_for(stamped, 5)
        assert (stamp.status, stamp.reason) == (v1.TRUE, "NodeNotReady")
        assert seconds(stamp.last_transition_time) == pytest.approx(t0 + 90)  # the start of the grace clock

        await cluster.advance(179)
        await asyncio.sleep(SETTLE)
        assert (await client.projects.get("run")).status.phase == v1.RUNNING
        await cluster.advance(1)
        run = await wait_phase(client, "run", v1.PENDING)
        assert run.status.node_ref == "" and condition(run, v1.CONDITION_NOT_READY_AT) is None

        assert (await client.projects.get("term")).status.phase == v1.TERMINATING
        await cluster.advance(600 - 180 - 0.5)
        await asyncio.sleep(SETTLE)
        assert (await client.projects.get("term")).status.phase == v1.TERMINATING
        await cluster.advance(0.5)
        term = await wait_phase(client, "term", v1.TERMINATED)
        assert (condition(term, v1.CONDITION_PHASE) or v1.Condition()).reason == "TerminationTimeout"

        dead = await client.projects.get("dead")  # Failed projects are never rescheduled
        assert (dead.status.phase, dead.status.node_ref) == (v1.FAILED, "n1")
        elsewhere = await client.projects.get("elsewhere")
        assert elsewhere.status.phase == v1.RUNNING and condition(elsewhere, v1.CONDITION_NOT_READY_AT) is None
        assert {e.spec.reason for e in await events_for(client, "run")} >= {"NodeNotReady"}


async def test_recovery_before_the_grace_period_clears_not_ready_at(
    client: Client, clock: FakeClock, cluster: Cluster
) -> None:
    await cluster.add("n1", "n2", "n3")
    await place(client, "run", v1.RUNNING)

    async def stamp() -> float | None:
        cond = condition(await client.projects.get("run"), v1.CONDITION_NOT_READY_AT)
        return seconds(cond.last_transition_time) if cond is not None else None

    async with health(client, clock, grace_period=180):
        cluster.kill("n1")
        await cluster.advance(90)
        first = await wait_for(stamp, 5)
        await cluster.advance(100)
        await cluster.revive("n1")  # back before the grace period ran out

        async def cleared() -> bool:
            return await stamp() is None

        await wait_for(cleared, 5, message="NotReadyAt removed")
        assert (await client.projects.get("run")).status.phase == v1.RUNNING
        assert await events_for(client, "run", "NodeRecovered")

        # a second outage starts a fresh grace clock (upstream kept the old stamp and evicted at once)
        cluster.kill("n1")
        await cluster.advance(90)
        second = await wait_for(stamp, 5)
        assert second == pytest.approx(first + 190)
        await cluster.advance(179)
        await asyncio.sleep(SETTLE)
        assert (await client.projects.get("run")).status.phase == v1.RUNNING
        await cluster.advance(1)
        await wait_phase(client, "run", v1.PENDING)


async def test_no_evictions_during_the_startup_grace(client: Client, clock: FakeClock, cluster: Cluster) -> None:
    await cluster.add("n2", "n3", "n4")
    await cluster.add("n1", renewed_ago=300)  # already silent when the controller starts
    await place(client, "sched", v1.SCHEDULED)
    async with health(client, clock, startup_grace_period=60):
        await wait_state(cluster, "n1", v1.NODE_NOT_READY)  # marking is not held back
        await cluster.advance(59)
        await asyncio.sleep(SETTLE)
        assert (await client.projects.get("sched")).status.phase == v1.SCHEDULED
        await cluster.advance(1)
        await wait_phase(client, "sched", v1.PENDING)


async def test_mass_failure_stops_evictions(client: Client, clock: FakeClock, cluster: Cluster) -> None:
    await cluster.add("n1", "n2", "n3", "n4", "n5")
    await place(client, "sched", v1.SCHEDULED, node="n1")
    async with health(client, clock):
        cluster.kill("n1", "n2", "n3")  # 60 % of the nodes at once
        await cluster.advance(90)
        for name in ("n1", "n2", "n3"):
            await wait_state(cluster, name, v1.NODE_NOT_READY)
        stopped = await wait_for(lambda: _events(client, ("n1", "n2", "n3"), "EvictionsStopped"), 5)
        assert stopped[0].spec.type == "Warning" and "60% of nodes are NotReady" in stopped[0].spec.message
        await cluster.advance(10)
        await asyncio.sleep(SETTLE)
        assert (await client.projects.get("sched")).status.phase == v1.SCHEDULED

        await cluster.revive("n3")  # 40 %: a node fault again, not the control plane
        await wait_state(cluster, "n3", v1.NODE_READY)
        await cluster.advance(5)
        await wait_phase(client, "sched", v1.PENDING)
        assert await _events(client, ("n1", "n2"), "EvictionsResumed")


async def _events(client: Client, names: Iterable[str], reason: str) -> list[v1.Event]:
    found: list[v1.Event] = []
    for name in names:
        found += await events_for(client, name, reason)
    return found


async def test_a_toleration_of_the_not_ready_taint_shortens_the_grace_for_that_project_only(client: Client) -> None:
    """Real time: n1 stops heartbeating; `quick` tolerates the built-in not-ready taint for 2 s and moves off about
    3 s after the last heartbeat, `slow` (default grace 180 s) stays, stamped."""
    real = SystemClock()
    for name in ("n1", "n2", "n3"):  # n2 and n3 stay alive: one dead node in three does not brake evictions
        await add_node(client, name)

    async def keep_alive() -> None:
        while True:
            for name in ("n2", "n3"):
                await renew(client, name, at=real.now())
            await asyncio.sleep(0.3)

    quick = project("quick")
    quick.spec.tolerations.add(key="node.caravanserai.io/not-ready", operator="Exists", effect="NoExecute")
    quick.spec.tolerations[0].toleration_seconds = 2
    await client.projects.create(quick)
    for name in ("quick", "slow"):
        if name == "slow":
            await client.projects.create(project("slow"))
        await set_phase(client, name, v1.SCHEDULED, node_ref="n1")
        await set_phase(client, name, v1.RUNNING)
    options = app.NodeHealthOptions(
        config=HealthConfig(heartbeat_timeout=1.0, grace_period=180.0, startup_grace_period=0.0)
    )
    beats = asyncio.create_task(keep_alive())
    try:
        await _quick_moves_slow_stays(client, real, options)
    finally:
        beats.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beats


async def _quick_moves_slow_stays(client: Client, real: SystemClock, options: app.NodeHealthOptions) -> None:
    async with running_manager(client, lambda m: app.setup(m, client, real, options)):
        last_beat = real.now()
        await renew(client, "n1", at=last_beat)  # and never again
        moved = await wait_phase(client, "quick", v1.PENDING, timeout=15)
        assert real.now() - last_beat < 10  # 1 s to notice, 2 s tolerated: far below the default 180 s
        assert moved.status.node_ref == "" and (condition(moved, v1.CONDITION_PHASE) or v1.Condition()).reason == (
            "NodeNotReady"
        )
        slow = await client.projects.get("slow")
        assert (slow.status.phase, slow.status.node_ref) == (v1.RUNNING, "n1")
        stamp = condition(slow, v1.CONDITION_NOT_READY_AT)
        assert stamp is not None and "returns to Pending at" in stamp.message
