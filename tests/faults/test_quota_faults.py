"""The quota queue under faults (issue #27): 30 projects queued behind a quota of 10, then the quota raised in steps of
3 and finally to 25 (an admission wave), while after the first admission of each step

1. the queue controller (cara-controller-manager --controllers queue) is SIGKILLed and started again;
2. the apiserver the controller writes through is SIGKILLed and started again on its address (the test watches,
   raises and checks through a second apiserver over the same etcd).

Checked from the final state, and from a watch of every project change: exactly min(quota, projects) = 25
projects admitted, each project exists once and was admitted at most once (Queued → Pending once, never back),
and the quota's `status.used` equals a recount of the admitted projects.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from fault_processes import OsProcess, Processes, controller_manager_argv

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.client.apply import modify
from caravanserai.testing.builders import project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for
from support.processes import ApiProcess

NAMESPACE = "wave"
PROJECTS = 30
FIRST_LIMIT, FINAL_LIMIT = 10, 25
STEP, KILLS = 3, 4  # KILLS raises of the limit by STEP, each with a kill, then the last raise


@dataclass
class PhaseLog:
    """Each project's phases in the order its stored versions were watched."""

    phases: dict[str, list[str]] = field(default_factory=dict)

    def record(self, obj: v1.Project) -> None:
        seen = self.phases.setdefault(obj.metadata.name, [])
        if not seen or seen[-1] != obj.status.phase:
            seen.append(obj.status.phase)

    def admissions(self, name: str) -> int:
        return sum(1 for a, b in itertools.pairwise(self.phases.get(name, [])) if a == v1.QUEUED and b != v1.QUEUED)

    def requeued(self, name: str) -> bool:
        return any(a != v1.QUEUED and b == v1.QUEUED for a, b in itertools.pairwise(self.phases.get(name, [])))

    @property
    def admitted(self) -> int:
        return sum(1 for name in self.phases if self.admissions(name))


async def _record(client: Client, log: PhaseLog) -> None:
    async for change in client.projects.watch(namespace=NAMESPACE, resource_version="0"):
        if change.type != v1.BOOKMARK:
            log.record(change.object)


@contextlib.asynccontextmanager
async def _background(coro: Awaitable[None]) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.ensure_future(coro)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _queue_behind_a_quota(client: Client) -> None:
    """Namespace `wave` with a quota of FIRST_LIMIT projects, and PROJECTS projects in it: FIRST_LIMIT Pending."""
    await client.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name=NAMESPACE)))
    quota = meta.with_type_meta(v1.ResourceQuota(metadata=v1.ObjectMeta(name="team", namespace=NAMESPACE)))
    quota.spec.hard["projects"] = str(FIRST_LIMIT)
    await client.resource(v1.ResourceQuota).create(quota)
    phases = [
        (await client.projects.create(project(f"p-{i:02d}", namespace=NAMESPACE))).status.phase for i in range(PROJECTS)
    ]
    assert phases.count(v1.PENDING) == FIRST_LIMIT and phases.count(v1.QUEUED) == PROJECTS - FIRST_LIMIT


async def _limit(client: Client, limit: int) -> None:
    def raise_to(quota: v1.ResourceQuota) -> bool:
        quota.spec.hard["projects"] = str(limit)
        return True

    await modify(client.resource(v1.ResourceQuota), f"{NAMESPACE}/team", raise_to)


async def _settled(client: Client) -> list[v1.Project] | None:
    """The projects once FINAL_LIMIT are admitted and the rest queued, else None."""
    projects = (await client.projects.list(namespace=NAMESPACE)).items
    admitted = [p for p in projects if p.status.phase == v1.PENDING]
    return projects if len(admitted) == FINAL_LIMIT and len(projects) == PROJECTS else None


async def _check_final_state(client: Client, log: PhaseLog, projects: list[v1.Project]) -> None:
    names = [p.metadata.name for p in projects]
    assert sorted(names) == [f"p-{i:02d}" for i in range(PROJECTS)]  # each exists once, none lost
    phases = sorted(p.status.phase for p in projects)
    assert phases == sorted([v1.PENDING] * FINAL_LIMIT + [v1.QUEUED] * (PROJECTS - FINAL_LIMIT))
    quota = await client.resource(v1.ResourceQuota).get(f"{NAMESPACE}/team")
    assert quota.spec.hard["projects"] == str(FINAL_LIMIT)
    recount = sum(1 for p in projects if p.status.phase != v1.QUEUED)
    assert dict(quota.status.used) == {"projects": str(recount)}

    async def watched_every_admission() -> bool:
        return log.admitted == FINAL_LIMIT - FIRST_LIMIT

    await wait_for(watched_every_admission, 10, message="the watch to have seen every admission")
    assert max(log.admissions(name) for name in names) == 1
    assert not any(log.requeued(name) for name in names)


async def _wave_with_kills(client: Client, kill: Callable[[], Awaitable[None]], log: PhaseLog) -> list[int]:
    """The admission wave: KILLS times the limit raised by STEP, and once the first of those admissions is seen,
    `kill` (which also starts the process again) while the others are under way; then the limit raised to
    FINAL_LIMIT. The number of admissions seen at each kill."""
    at: list[int] = []
    for k in range(1, KILLS + 1):
        before = log.admitted
        await _limit(client, FIRST_LIMIT + STEP * k)
        await wait_for(lambda before=before: log.admitted > before, 30, interval=0.01, message="an admission")
        at.append(log.admitted)
        await kill()
    await _limit(client, FINAL_LIMIT)
    return at


async def test_queue_controller_killed_during_an_admission_wave(api_process: ApiProcess, processes: Processes) -> None:
    log = PhaseLog()
    async with Client(api_process.address, timeout=5, retry_timeout=20) as client:
        await _queue_behind_a_quota(client)
        argv = controller_manager_argv(api_process.address, "--controllers", "queue")
        controller = await processes.start("queue", argv)

        async def kill_and_restart(process: OsProcess = controller) -> None:
            await process.kill()
            await process.start()

        async with _background(_record(client, log)):
            at = await _wave_with_kills(client, kill_and_restart, log)
            projects = await wait_for(lambda: _settled(client), 30, interval=0.1, message="25 admitted")
            await _check_final_state(client, log, projects)
    print(f"\nqueue controller SIGKILLed at {at} of {FINAL_LIMIT - FIRST_LIMIT} admissions")


@pytest.fixture
async def second_api(etcd: EtcdServer, api_process: ApiProcess) -> AsyncIterator[ApiProcess]:
    """Another apiserver over the same data, for the test's own reads and watch."""
    other = ApiProcess(etcd.endpoint, prefix=api_process.prefix)
    await other.start()
    try:
        yield other
    finally:
        await other.stop()


async def test_apiserver_killed_during_an_admission_wave(
    api_process: ApiProcess, second_api: ApiProcess, processes: Processes
) -> None:
    log = PhaseLog()
    async with Client(second_api.address, timeout=5, retry_timeout=20) as client:
        await _queue_behind_a_quota(client)
        argv = controller_manager_argv(api_process.address, "--controllers", "queue")
        await processes.start("queue", argv)

        async def kill_and_restart() -> None:
            api_process.kill()
            await api_process.stop()  # reaped
            await api_process.start()

        async with _background(_record(client, log)):
            at = await _wave_with_kills(client, kill_and_restart, log)
            projects = await wait_for(lambda: _settled(client), 30, interval=0.1, message="25 admitted")
            await _check_final_state(client, log, projects)
    print(f"\napiserver SIGKILLed at {at} of {FINAL_LIMIT - FIRST_LIMIT} admissions")
