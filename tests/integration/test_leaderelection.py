"""Leader election through the API on a real apiserver: two managers never run the same controller at once
(also across a crash of the leader and a graceful hand-over), a leader that cannot renew stops at once, and
expiry is judged by each candidate's own clock."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import seconds
from caravanserai.controller import Controller, LeaderElectionConfig, LeaderElector, Manager, Result
from caravanserai.informer import Backoff, WatchOptions
from caravanserai.testing.apiserver import RunningApiServer, start_apiserver
from caravanserai.testing.builders import project
from caravanserai.testing.clock import FakeClock
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for

LEASE = 1.0
RENEW_DEADLINE = 0.6
RETRY = 0.15

Interval = tuple[str, float, float]  # (who, started, ended) of one reconcile, monotonic seconds


def election(identity: str, name: str = "busy-controller") -> LeaderElectionConfig:
    return LeaderElectionConfig(
        name=name,
        identity=identity,
        lease_duration=LEASE,
        renew_deadline=RENEW_DEADLINE,
        retry_period=RETRY,
        release_timeout=10,  # these tests assert on hand-overs; the 2 s default can run out on a loaded machine
    )


class Busy:
    """Reconciles its key over and over, recording when each reconcile really ran (also when cancelled)."""

    def __init__(self, who: str, intervals: list[Interval]) -> None:
        self.who = who
        self.intervals = intervals

    async def reconcile(self, key: str) -> Result:
        started = time.monotonic()
        try:
            await asyncio.sleep(0.02)
        finally:
            self.intervals.append((self.who, started, time.monotonic()))
        return Result(requeue_after=0.005)


class Replica:
    """One manager process: its own connection, informers, controller and lease identity."""

    def __init__(self, address: str, who: str, intervals: list[Interval]) -> None:
        self.who = who
        self.client = Client(address, timeout=2, retry_timeout=2)
        self.manager = Manager(
            self.client,
            leader_election=election(who),
            watch_options=WatchOptions(backoff=Backoff(initial=0.05, cap=0.3)),
            shutdown_timeout=2.0,
        )
        controller = Controller("busy", Busy(who, intervals))
        controller.watch(self.manager.informers.informer(v1.Project))
        self.manager.add(controller)
        self.task = asyncio.create_task(self.manager.run(), name=f"replica-{who}")

    @property
    def leading(self) -> bool:
        return self.manager.leading

    async def crash(self) -> None:
        """Stop abruptly: no drain, no lease release."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.client.close()

    async def stop(self) -> None:
        """Stop gracefully (as on SIGTERM): drain, release the lease."""
        self.manager.stop()
        await asyncio.wait_for(self.task, 5)
        await self.client.close()


def overlaps(intervals: list[Interval]) -> list[tuple[Interval, Interval]]:
    ordered = sorted(intervals, key=lambda i: i[1])
    return [
        (a, b)
        for n, a in enumerate(ordered)
        for b in ordered[n + 1 :]
        if a[0] != b[0] and b[1] < a[2]  # b started before a ended
    ]


@contextlib.asynccontextmanager
async def replicas(address: str, names: list[str], intervals: list[Interval]) -> AsyncIterator[list[Replica]]:
    started = [Replica(address, who, intervals) for who in names]
    try:
        yield started
    finally:
        for replica in started:
            if not replica.task.done():
                await replica.crash()


async def test_two_managers_never_run_the_controller_at_once_across_failovers(
    client: Client, api: RunningApiServer
) -> None:
    await client.projects.create(project("work"))
    intervals: list[Interval] = []
    async with replicas(api.address, ["a", "b"], intervals) as (a, b):
        await wait_for(lambda: a.leading or b.leading, 5)
        leader, standby = (a, b) if a.leading else (b, a)
        await asyncio.sleep(0.5)
        assert not standby.leading

        # The leader crashes without releasing: the standby waits out the lease, measured on its own clock.
        await leader.crash()
        crashed_at = time.monotonic()
        await wait_for(lambda: standby.leading, 5)
        assert time.monotonic() - crashed_at >= LEASE - RENEW_DEADLINE  # not before the lease could expire
        await asyncio.sleep(0.5)

        # A new replica joins; the leader stops gracefully and hands over at once by releasing the lease.
        async with replicas(api.address, ["c"], intervals) as (c,):
            await wait_for(lambda: c.manager.informers.has_synced(), 5)
            await asyncio.sleep(0.3)
            assert not c.leading
            released_at = time.monotonic()
            await standby.stop()
            await wait_for(lambda: c.leading, 5)
            assert time.monotonic() - released_at < LEASE  # no need to wait for expiry
            await asyncio.sleep(0.5)
            await c.stop()

    ran = {who for who, _, _ in intervals}
    assert ran == {leader.who, standby.who, "c"}
    assert overlaps(intervals) == []
    lease = await client.leases.get("busy-controller")
    assert lease.spec.holder_identity == ""  # released by the last graceful stop
    assert lease.spec.lease_transitions >= 2


async def test_a_leader_that_cannot_renew_stops_its_controllers_within_the_deadline(etcd: EtcdServer) -> None:
    api = await start_apiserver(etcd.endpoint, bookmark_interval=0.2)
    intervals: list[Interval] = []
    try:
        async with Client(api.address) as setup:
            await setup.projects.create(project("work"))
        async with replicas(api.address, ["solo"], intervals) as (solo,):
            await wait_for(lambda: solo.leading and intervals, 5)
            await api.stop()  # the API is gone: no renewal can succeed
            lost_at = time.monotonic()
            # `leading` (may act) turns False at the renew deadline by the clock; the controllers are cancelled when
            # the renewer sees it, and `is_leader` turns False once they have finished: nothing runs after that.
            elector = solo.manager.elector
            assert elector is not None
            await wait_for(lambda: not elector.is_leader, 5)
            stopped_at = time.monotonic()
            assert not solo.leading
            assert stopped_at - lost_at <= RENEW_DEADLINE + RETRY + 0.3
            last_end = max(end for _, _, end in intervals)
            assert last_end <= stopped_at  # nothing ran after leadership ended
            # and nothing started after `leading` turned False, though the controllers ran on until cancelled
            assert max(start for _, start, _ in intervals) <= elector.last_renew + RENEW_DEADLINE
            count = len(intervals)
            await asyncio.sleep(0.3)
            assert len(intervals) == count

            api = await start_apiserver(etcd.endpoint, prefix=api.prefix, listen=api.address, bookmark_interval=0.2)
            await wait_for(lambda: solo.leading and len(intervals) > count, 10)  # campaigns again and resumes
            await solo.stop()
    finally:
        await api.stop()


async def test_expiry_is_judged_on_the_candidates_clock_and_a_paused_leader_yields(client: Client) -> None:
    clock_a, clock_b = FakeClock(), FakeClock(start=FakeClock().now() + 3600.0)  # skewed by an hour
    a = LeaderElector(client, election("a", "paused"), clock=clock_a)
    b = LeaderElector(client, election("b", "paused"), clock=clock_b)
    a_working = asyncio.Event()
    a_cancelled = asyncio.Event()

    async def a_leads() -> None:
        a_working.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            a_cancelled.set()
            raise

    run_a = asyncio.create_task(a.run(a_leads))
    await asyncio.wait_for(a_working.wait(), 5)  # a takes the free lease; its clock then stands still
    run_b = asyncio.create_task(b.run(asyncio.Event().wait))
    try:
        first = await client.leases.get("paused")
        assert first.spec.holder_identity == "a" and seconds(first.spec.renew_time) == pytest.approx(clock_a.now())

        for _ in range(5):  # b keeps finding the lease held: 0.75 s on b's clock since it first saw it
            await wait_for(lambda: clock_b.sleepers == 1, 5)
            clock_b.advance(RETRY)
            await asyncio.sleep(0.05)
        assert not b.is_leader
        await wait_for(lambda: clock_b.sleepers == 1, 5)
        clock_b.advance(LEASE)  # now the record has been unchanged for longer than the lease
        await wait_for(lambda: b.is_leader, 5)
        taken = await client.leases.get("paused")
        assert taken.spec.holder_identity == "b" and taken.spec.lease_transitions == 1
        assert seconds(taken.spec.acquire_time) == pytest.approx(clock_b.now())

        clock_a.advance(RETRY)  # a wakes up to renew, finds b holding the lease, and stops at once
        await asyncio.wait_for(a_cancelled.wait(), 5)
        assert not a.is_leader
    finally:
        for task in (run_a, run_b):
            task.cancel()
        await asyncio.gather(run_a, run_b, return_exceptions=True)


async def test_a_leader_paused_past_its_renew_deadline_knows_before_its_renewer_runs(client: Client) -> None:
    clock = FakeClock()
    elector = LeaderElector(client, election("a", "pausing"), clock=clock)
    working, cancelled = asyncio.Event(), asyncio.Event()

    async def leads() -> None:
        working.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    run = asyncio.create_task(elector.run(leads))
    try:
        await asyncio.wait_for(working.wait(), 5)
        assert elector.holds_lease()
        clock.advance(RENEW_DEADLINE)  # as after SIGSTOP/SIGCONT: every timer is due, none has run yet
        assert elector.is_leader and not elector.holds_lease()
        await asyncio.wait_for(cancelled.wait(), 5)  # then the renewer runs, finds the deadline passed, stops
        assert not elector.is_leader and not elector.holds_lease()
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)


def test_timings_must_leave_room_for_renewal() -> None:
    with pytest.raises(ValueError, match="lease_duration > renew_deadline"):
        LeaderElectionConfig(name="x", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError):
        LeaderElectionConfig(name="x", lease_duration=15, renew_deadline=2, retry_period=2)
    config = LeaderElectionConfig(name="x")
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (15.0, 10.0, 2.0)
    host, pid, suffix = config.identity.rsplit("_", 2)
    assert host and pid.isdigit() and len(suffix) == 6


async def test_shutdown_while_the_api_is_down_gives_up_the_release_quickly(etcd: EtcdServer) -> None:
    """Releasing the lease is a courtesy: with the API gone, a graceful stop gives it up after release_timeout
    instead of retrying for the client's whole retry_timeout."""
    api = await start_apiserver(etcd.endpoint, bookmark_interval=0.2)
    try:
        async with Client(api.address, timeout=5, retry_timeout=20) as client:
            config = LeaderElectionConfig(name="courteous", identity="solo")  # release_timeout 2 s
            manager = Manager(client, leader_election=config, shutdown_timeout=30)
            controller = Controller("idle", Busy("solo", []))
            controller.watch(manager.informers.informer(v1.Project))
            manager.add(controller)
            run = asyncio.create_task(manager.run())
            assert manager.elector is not None
            elector = manager.elector
            await wait_for(lambda: elector.is_leader, 10)
            await api.stop()
            started = time.monotonic()
            manager.stop()
            await asyncio.wait_for(run, 15)
            took = time.monotonic() - started
        assert took < 2.0 + 1.5  # the release timeout and a little; the client alone would retry for 20 s
    finally:
        await api.stop()


async def test_a_release_after_a_renew_it_did_not_see_answered_still_clears_the_holder(client: Client) -> None:
    """A renew cancelled in flight may be written without its answer arriving: the version the elector last saw
    is then one behind. The release must still clear the holder (the CI failure this test stands for)."""
    clock = FakeClock()
    elector = LeaderElector(client, election("solo", "unseen-renew"), clock=clock)
    leading = asyncio.Event()

    async def lead() -> None:
        leading.set()
        await asyncio.Event().wait()

    run = asyncio.create_task(elector.run(lead))
    try:
        await asyncio.wait_for(leading.wait(), 5)
        renewed = await client.leases.get("unseen-renew")
        renewed.spec.renew_time.seconds += 1  # the write of a renew whose answer never reached the elector
        await client.leases.update(renewed)
        assert await elector.release()
        assert (await client.leases.get("unseen-renew")).spec.holder_identity == ""
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
