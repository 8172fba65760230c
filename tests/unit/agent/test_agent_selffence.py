"""Self-fencing: when it fences (fake clock, a Docker stand-in), what it stops, and the flag's default."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from caravanserai import meta, v1
from caravanserai.agent.__main__ import config_from_args, parser
from caravanserai.agent.config import DEFAULT_FENCE_AFTER
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.records import ContainerSummary
from caravanserai.agent.fencing.stops import KILL_SLACK, LEAD_MARGIN
from caravanserai.agent.selffence import SelfFence
from caravanserai.controllers.nodehealth.policy import HealthConfig
from caravanserai.testing.clock import FakeClock


@dataclass
class FakeDocker:
    containers: list[ContainerSummary]
    stopped: list[str] = field(default_factory=list)
    timeouts: dict[str, int] = field(default_factory=dict)

    async def list_containers(self, label_filter: list[str]) -> list[ContainerSummary]:
        return [c for c in self.containers if c.id not in self.stopped]

    async def stop_container(self, container_id: str, *, timeout: int) -> None:
        self.stopped.append(container_id)
        self.timeouts[container_id] = timeout


@dataclass
class FakeProjects:
    docker: FakeDocker
    stop_timeout: int = 1


async def _advance(clock: FakeClock, seconds: float) -> None:
    clock.advance(seconds)
    for _ in range(10):  # let the woken loop run to its next sleep
        await asyncio.sleep(0)


def _container(cid: str, project: str, stop_timeout: int | None = None) -> ContainerSummary:
    labels = {"caravanserai.io/project": project}
    if stop_timeout is not None:
        labels[naming.LABEL_STOP_TIMEOUT] = str(stop_timeout)
    return ContainerSummary(labels=labels, id=cid, state="running")


def test_default_is_node_healths_timeout_plus_grace() -> None:
    health = HealthConfig()
    assert health.heartbeat_timeout + health.grace_period == DEFAULT_FENCE_AFTER
    args = parser().parse_args(["--node-name", "n1"])
    assert config_from_args(args).fence_after == DEFAULT_FENCE_AFTER
    args = parser().parse_args(["--node-name", "n1", "--fence-after", "1m30s"])
    assert config_from_args(args).fence_after == 90.0


def test_bad_duration_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--fence-after", "soon"])
    assert "--fence-after" in capsys.readouterr().err


async def test_fences_only_after_the_silence_and_stops_every_running_container() -> None:
    clock = FakeClock()
    docker = FakeDocker([_container("a", "web"), _container("b", "db")])
    fence = SelfFence(
        fence_after=10.0,
        clock=clock,
        projects=FakeProjects(docker),
        client=None,
        node="n1",  # type: ignore[arg-type]  # fakes of the projects adapter and the client
    )
    task = asyncio.create_task(fence.run())
    try:
        await _advance(clock, 5.0)
        await fence.contact(clock.monotonic())  # an answered heartbeat restarts the count
        await _advance(clock, 7.0)  # the 1 s stops plus the margin start at 10 - 2.5 = 7.5 s
        assert not fence.fenced and docker.stopped == []
        await _advance(clock, 1.0)
        assert fence.fenced and sorted(docker.stopped) == ["a", "b"]
        assert docker.timeouts == {"a": 1, "b": 1}
        assert fence.fences == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _fence_times(fence_after: float, stop_timeout: int) -> tuple[float, int]:
    """When the fence stopped a container with `stop_timeout` (seconds of silence) and the timeout it gave."""
    clock = FakeClock()
    docker = FakeDocker([_container("slow", "web", stop_timeout=stop_timeout)])
    fence = SelfFence(
        fence_after=fence_after,
        clock=clock,
        projects=FakeProjects(docker, stop_timeout=1),
        client=None,
        node="n1",  # type: ignore[arg-type]  # fakes of the projects adapter and the client
    )
    start = clock.monotonic()
    task = asyncio.create_task(fence.run())
    try:
        while not docker.stopped:
            await _advance(clock, fence.interval)
        return clock.monotonic() - start, docker.timeouts["slow"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize(("fence_after", "stop_timeout"), [(30.0, 10), (270.0, 10), (12.0, 10), (4.0, 30)])
async def test_a_slow_stop_starts_early_enough_to_end_by_the_deadline(fence_after: float, stop_timeout: int) -> None:
    silent, timeout = await _fence_times(fence_after, stop_timeout)
    assert silent + timeout <= fence_after - KILL_SLACK  # SIGKILL at the latest half a second before the deadline
    assert silent >= fence_after / 2  # never earlier than half the silence
    if fence_after / 2 < fence_after - stop_timeout - LEAD_MARGIN:
        assert timeout == stop_timeout  # the container gets its whole grace period when it fits


@dataclass
class FakeProjectsApi:
    bound: dict[str, str]  # project → node it is bound to now

    async def get(self, key: str) -> v1.Project:  # the fence asks by key (`default/web`)
        project = v1.Project()
        project.metadata.namespace, name = meta.split_key(key)
        project.metadata.name, project.metadata.uid = name, f"uid-{name}"
        project.status.node_ref, project.status.phase = self.bound[name], v1.RUNNING
        return project


@dataclass
class FakeClient:
    projects: FakeProjectsApi


@dataclass
class RestartingDocker(FakeDocker):
    started: list[str] = field(default_factory=list)

    async def list_containers(self, label_filter: list[str]) -> list[ContainerSummary]:
        wanted = {f.partition("=")[2] for f in label_filter if f.startswith("caravanserai.io/project=")}
        state = "exited" if self.stopped else "running"
        return [
            ContainerSummary(labels=c.labels, id=c.id, state="running" if c.id in self.started else state)
            for c in self.containers
            if not wanted or c.label(naming.LABEL_PROJECT) in wanted
        ]

    async def start_container(self, container_id: str) -> None:
        self.started.append(container_id)


async def test_on_reconnect_only_projects_still_bound_here_start_again() -> None:
    clock = FakeClock()
    web = ContainerSummary(
        labels={"caravanserai.io/project": "web", "caravanserai.io/project-uid": "uid-web"}, id="a", state="running"
    )
    db = ContainerSummary(
        labels={"caravanserai.io/project": "db", "caravanserai.io/project-uid": "uid-db"}, id="b", state="running"
    )
    docker = RestartingDocker([web, db])
    unfenced: list[bool] = []

    async def on_unfenced() -> None:
        unfenced.append(True)

    client = FakeClient(FakeProjectsApi({"web": "n1", "db": "n2"}))  # db moved to n2 meanwhile
    fence = SelfFence(
        fence_after=10.0,
        clock=clock,
        projects=FakeProjects(docker),
        client=client,
        node="n1",  # type: ignore[arg-type]  # fakes of the projects adapter and the client
        on_unfenced=on_unfenced,
    )
    task = asyncio.create_task(fence.run())
    try:
        await _advance(clock, 0.0)  # the loop starts sleeping
        await _advance(clock, 11.0)
        assert fence.fenced and sorted(docker.stopped) == ["a", "b"]
        await fence.contact(clock.monotonic())
        assert not fence.fenced and unfenced == [True]
        assert docker.started == ["a"]  # web is still bound here; db's copy is left to the reconciler to remove
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_renewal_stamped_before_the_silence_does_not_lift_the_fence() -> None:
    """A heartbeat stamped before a freeze (or a long wait for the network) and answered only now renews the Lease
    to a time node health already counts as silent: starting the containers again then would run them past the
    deadline. The fence stays until a renewal stamped recently enough."""
    clock = FakeClock()
    web = ContainerSummary(
        labels={"caravanserai.io/project": "web", "caravanserai.io/project-uid": "uid-web"}, id="a", state="running"
    )
    docker = RestartingDocker([web])
    client = FakeClient(FakeProjectsApi({"web": "n1"}))
    fence = SelfFence(
        fence_after=10.0,
        clock=clock,
        projects=FakeProjects(docker),
        client=client,
        node="n1",  # type: ignore[arg-type]  # fakes of the projects adapter and the client
    )
    task = asyncio.create_task(fence.run())
    try:
        await _advance(clock, 0.0)
        stale = clock.monotonic() + 2.0  # stamped, then the agent froze before the answer came
        await _advance(clock, 11.0)
        assert fence.fenced and docker.stopped == ["a"]
        await fence.contact(stale)  # deadline stale + 10: 1 s away
        assert fence.fenced and docker.started == []
        await _advance(clock, 2.0)
        await fence.contact(clock.monotonic())
        assert not fence.fenced and docker.started == ["a"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
