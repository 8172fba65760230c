"""Start-first replacement (`agent/workload/startfirst.py`) over a Docker stand-in and a fake clock: a replacement
that does not become healthy is removed and raised as a StartFirstFailed `SetupFailure` naming the service and
why, the same replacement is not tried again before its backoff (a new spec is), and a healthy one switches."""

from __future__ import annotations

import dataclasses

import pytest

from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.records import Observed
from caravanserai.agent.workload.failures import REASON_START_FIRST_FAILED, SetupFailure
from caravanserai.agent.workload.startfirst import StartFirst
from caravanserai.testing.builders import project
from caravanserai.testing.clock import FakeClock

NODE = "n1"


class Docker:
    """What StartFirst asks of Docker: containers by name or id; a new one starts with the status it is told."""

    def __init__(self, old: Observed, *, new_status: str) -> None:
        self.containers = {naming.container_name("web", "web", NODE): old}
        self.new_status = new_status
        self.created = 0
        self.removed: list[str] = []

    async def create(self, name: str) -> str:
        self.created += 1
        found = Observed(service="web", container_id=f"new-{self.created}", status="created")
        self.containers[name] = found
        return found.container_id

    def _find(self, ref: str) -> tuple[str, Observed] | None:
        return next(((k, o) for k, o in self.containers.items() if ref in (k, o.container_id)), None)

    async def inspect_container(self, ref: str) -> Observed | None:
        found = self._find(ref)
        return found[1] if found else None

    async def start_container(self, ref: str) -> None:
        found = self._find(ref)
        assert found is not None
        self.containers[found[0]] = dataclasses.replace(found[1], status=self.new_status, exit_code=1)

    async def remove_container(self, ref: str, *, timeout: int) -> None:
        found = self._find(ref)
        if found is not None:
            del self.containers[found[0]]
            self.removed.append(found[1].container_id)

    async def rename_container(self, ref: str, name: str) -> None:
        found = self._find(ref)
        assert found is not None
        del self.containers[found[0]]
        self.containers[name] = found[1]


def web(generation: int = 2) -> v1.Project:
    p = project("web", services=["web"])
    p.metadata.uid, p.metadata.generation = "uid-web", generation
    p.spec.update.order = v1.UPDATE_START_FIRST
    return p


OLD = Observed(service="web", container_id="old", status="running")


async def test_a_replacement_that_stops_is_said_and_backed_off_until_the_spec_changes() -> None:
    docker, clock = Docker(OLD, new_status="exited"), FakeClock()
    start_first = StartFirst(docker, node=NODE, clock=clock)  # type: ignore[arg-type]  # the stand-in has the calls StartFirst makes
    p = web()

    async def replace(project: v1.Project) -> SetupFailure:
        with pytest.raises(SetupFailure) as raised:
            await start_first.replace(project, project.spec.services[0], OLD, create=docker.create, grace=1)
        return raised.value

    failure = await replace(p)
    assert failure.reason == REASON_START_FIRST_FAILED
    assert failure.message == (
        "service web: its new container stopped (exited, exit code 1) (start-first); the old container keeps serving"
    )
    assert docker.created == 1 and docker.removed == ["new-1"]
    assert docker.containers == {naming.container_name("web", "web", NODE): OLD}  # the old one runs on, by its name

    assert (await replace(p)).message == failure.message and docker.created == 1  # within its backoff: not tried
    clock.advance(11.0)  # the first delay: 10 s (jitter 10 %)
    await replace(p)
    assert docker.created == 2
    clock.advance(11.0)  # the second delay is about 20 s
    await replace(p)
    assert docker.created == 2
    await replace(web(generation=3))  # a new spec is tried at once
    assert docker.created == 3
    start_first.forget("web")  # gone from the node: nothing is held any more
    await replace(web(generation=3))
    assert docker.created == 4


async def test_a_healthy_replacement_switches_then_removes_the_old_one() -> None:
    docker, switched = Docker(OLD, new_status="running"), list[tuple[str, str]]()
    start_first = StartFirst(docker, node=NODE, clock=FakeClock(), on_switch=lambda p, s: switched.append((p, s)))  # type: ignore[arg-type]  # the stand-in has the calls StartFirst makes
    p = web()
    found = await start_first.replace(p, p.spec.services[0], OLD, create=docker.create, grace=1)
    assert found.container_id == "new-1" and switched == [("default/web", "web")] and docker.removed == ["old"]
    assert docker.containers[naming.container_name("web", "web", NODE)].container_id == "new-1"
