"""Self-fencing: when it fences (fake clock, a Docker stand-in), what it stops, and the flag's default."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from caravanserai.agent.__main__ import config_from_args, parser
from caravanserai.agent.config import DEFAULT_FENCE_AFTER
from caravanserai.agent.dockertypes import ContainerSummary
from caravanserai.agent.selffence import SelfFence
from caravanserai.controllers.nodehealth.policy import HealthConfig
from caravanserai.testing.clock import FakeClock


@dataclass
class FakeDocker:
    containers: list[ContainerSummary]
    stopped: list[str] = field(default_factory=list)

    async def list_containers(self, label_filter: list[str]) -> list[ContainerSummary]:
        return [c for c in self.containers if c.id not in self.stopped]

    async def stop_container(self, container_id: str, *, timeout: int) -> None:
        self.stopped.append(container_id)


@dataclass
class FakeProjects:
    docker: FakeDocker
    stop_timeout: int = 1


async def _advance(clock: FakeClock, seconds: float) -> None:
    clock.advance(seconds)
    for _ in range(10):  # let the woken loop run to its next sleep
        await asyncio.sleep(0)


def _container(cid: str, project: str) -> ContainerSummary:
    return ContainerSummary(labels={"caravanserai.io/project": project}, id=cid, state="running")


def test_default_is_node_healths_timeout_plus_grace() -> None:
    health = HealthConfig()
    assert DEFAULT_FENCE_AFTER == health.heartbeat_timeout + health.grace_period
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
        fence_after=10.0, clock=clock, projects=FakeProjects(docker), client=None, node="n1"  # type: ignore[arg-type]
    )
    task = asyncio.create_task(fence.run())
    try:
        await _advance(clock, 5.0)
        await fence.contact()  # an answered heartbeat restarts the count
        await _advance(clock, 9.0)
        assert not fence.fenced and docker.stopped == []
        await _advance(clock, 1.5)
        assert fence.fenced and sorted(docker.stopped) == ["a", "b"]
        assert fence.fences == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
