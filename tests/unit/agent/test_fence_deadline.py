"""The fence deadline kept across processes (fake clock, a Docker stand-in, a real directory): the record, the
node's watchdog, and the agent's self-fence taking a recorded deadline over, fencing before it renews, and counting
from the renewal's stamp."""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from test_agent_selffence import FakeClient, FakeProjectsApi

from caravanserai import v1
from caravanserai.agent.config import AgentConfig
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.records import ContainerSummary
from caravanserai.agent.fencing.__main__ import main as watchdog_main
from caravanserai.agent.fencing.record import Deadline, FenceFiles
from caravanserai.agent.fencing.stops import KILL_SLACK
from caravanserai.agent.fencing.watchdog import FenceWatchdog
from caravanserai.agent.node import Heartbeat
from caravanserai.agent.selffence import SelfFence
from caravanserai.testing import FakeClient as FakeApi
from caravanserai.testing.clock import FakeClock

NODE = "n1"
BOOT = "boot-1"


@dataclass
class Engine:
    """Containers by id: labels and state; stops and starts recorded in order."""

    containers: dict[str, tuple[dict[str, str], str]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    timeouts: dict[str, int] = field(default_factory=dict)

    def run(self, cid: str, project: str, *, node: str = NODE, uid: str = "") -> None:
        labels = naming.owner_labels(node=node, project=project, project_uid=uid or f"uid-{project}")
        self.containers[cid] = (labels, "running")

    def state(self, cid: str) -> str:
        return self.containers[cid][1]

    async def list_containers(self, label_filter: list[str]) -> list[ContainerSummary]:
        wanted = [f.split("=", 1) for f in label_filter]
        return [
            ContainerSummary(labels=labels, id=cid, state=state)
            for cid, (labels, state) in self.containers.items()
            if all(labels.get(key) == value for key, value in wanted)
        ]

    async def stop_container(self, container_id: str, *, timeout: int) -> None:
        self.calls.append(f"stop {container_id}")
        self.timeouts[container_id] = timeout
        labels, _ = self.containers[container_id]
        self.containers[container_id] = (labels, "exited")

    async def start_container(self, container_id: str) -> None:
        self.calls.append(f"start {container_id}")
        labels, _ = self.containers[container_id]
        self.containers[container_id] = (labels, "running")


@dataclass
class Runtime:
    docker: Engine
    stop_timeout: int = 1


def _files(tmp_path: Path, boot: str = BOOT) -> FenceFiles:
    return FenceFiles(tmp_path / "fence", NODE, boot_id=boot)


def _fence(clock: FakeClock, engine: Engine, files: FenceFiles | None, bound: dict[str, str]) -> SelfFence:
    return SelfFence(
        fence_after=10.0,
        clock=clock,
        projects=Runtime(engine),  # type: ignore[arg-type]  # a stand-in of the projects adapter
        client=FakeClient(FakeProjectsApi(bound)),  # type: ignore[arg-type]  # a stand-in of the client
        node=NODE,
        files=files,
    )


async def _advance(clock: FakeClock, seconds: float) -> None:
    clock.advance(seconds)
    for _ in range(10):  # let whatever woke run to its next sleep
        await asyncio.sleep(0)


# ---- the record ------------------------------------------------------------------------------------------------


def test_the_record_is_read_back_whole_and_bound_to_its_boot(tmp_path: Path) -> None:
    files = _files(tmp_path)
    assert files.read_deadline() is None  # never armed
    deadline = Deadline(at=123.25, boot_id=BOOT, fence_after=10.0, stop_timeout=3)
    files.write_deadline(deadline)
    assert files.read_deadline() == deadline
    assert deadline.left(120.0, BOOT) == 3.25
    assert deadline.left(120.0, "boot-2") == -math.inf  # read after a reboot: passed
    assert Deadline(at=1.0, boot_id=BOOT, fence_after=0.0, stop_timeout=3).left(99.0, BOOT) == math.inf  # disarmed
    assert [p.name for p in (tmp_path / "fence").iterdir()] == [f"{NODE}.deadline.json"]  # no temporary left
    files.deadline_path.write_text("{not json")
    assert files.read_deadline() is None  # unreadable: counted as absent


def test_a_note_counts_only_for_its_own_deadline(tmp_path: Path) -> None:
    files = _files(tmp_path)
    first = Deadline(at=10.0, boot_id=BOOT, fence_after=10.0, stop_timeout=1)
    files.write_stopped(first, {"web", "db"})
    assert files.read_stopped(first) == {"web", "db"}
    assert files.read_stopped(Deadline(at=20.0, boot_id=BOOT, fence_after=10.0, stop_timeout=1)) == set()
    assert json.loads(files.stopped_path.read_text())["projects"] == ["db", "web"]


# ---- the watchdog ----------------------------------------------------------------------------------------------


async def test_the_watchdog_meets_a_deadline_nobody_renews(tmp_path: Path) -> None:
    clock, engine, files = FakeClock(), Engine(), _files(tmp_path)
    engine.run("a", "web")
    engine.run("b", "db")
    engine.run("other", "web", node="n2")  # another node's container on the same engine
    watchdog = FenceWatchdog(files, engine, clock=clock)
    await watchdog.look()
    assert engine.calls == []  # no record: nothing to watch
    files.write_deadline(Deadline(at=10.0, boot_id=BOOT, fence_after=10.0, stop_timeout=1))
    await _advance(clock, 7.0)
    await watchdog.look()
    assert engine.calls == [] and watchdog.engaged is None  # 3 s left: the 1 s stops start at 2.5 s
    await _advance(clock, 0.6)
    await watchdog.look()
    assert sorted(engine.calls) == ["stop a", "stop b"] and engine.state("other") == "running"
    assert all(t + 7.6 <= 10.0 - KILL_SLACK for t in engine.timeouts.values())  # over by the deadline
    assert files.read_stopped(files.read_deadline()) == {"default/web", "default/db"}  # type: ignore[arg-type]  # the record exists
    engine.run("a", "web")  # something started it again while the deadline stays passed
    await _advance(clock, 5.0)
    await watchdog.look()
    assert engine.calls[-1] == "stop a" and engine.timeouts["a"] == 0  # stopped again, SIGKILL at once
    files.write_deadline(Deadline(at=30.0, boot_id=BOOT, fence_after=10.0, stop_timeout=1))  # the agent is back
    engine.run("a", "web")
    await watchdog.look()
    assert watchdog.engaged is None and engine.state("a") == "running" and watchdog.fences == 1


async def test_the_watchdog_stops_at_once_what_runs_after_a_reboot_and_never_when_disarmed(tmp_path: Path) -> None:
    clock, engine = FakeClock(), Engine()
    engine.run("a", "web")
    old_boot = _files(tmp_path, "boot-0")
    old_boot.write_deadline(Deadline(at=1e9, boot_id="boot-0", fence_after=10.0, stop_timeout=1))
    watchdog = FenceWatchdog(_files(tmp_path), engine, clock=clock)
    await watchdog.look()
    assert engine.calls == ["stop a"] and engine.timeouts["a"] == 0
    engine.run("a", "web")
    _files(tmp_path).write_deadline(Deadline(at=0.0, boot_id=BOOT, fence_after=0.0, stop_timeout=1))
    await _advance(clock, 100.0)
    await watchdog.look()
    assert engine.state("a") == "running"  # --fence-after 0: never


# ---- the agent's self-fence ------------------------------------------------------------------------------------


async def test_an_answer_after_the_deadline_fences_before_it_renews(tmp_path: Path) -> None:
    """A frozen agent (its check loop never ran) resumes past its deadline: the first answered heartbeat stops the
    copies first (the project may run elsewhere already), then lifts the fence for those still bound here."""
    clock, engine = FakeClock(), Engine()
    engine.run("a", "web")
    engine.run("b", "db")
    fence = _fence(clock, engine, _files(tmp_path), {"web": NODE, "db": "n2"})
    await fence.resume()
    await _advance(clock, 12.0)  # frozen: no check ran
    await fence.contact(clock.monotonic())
    assert engine.calls[:2] == ["stop a", "stop b"] and engine.calls[2:] == ["start a"]
    assert (fence.fences, fence.fenced) == (1, False)
    assert engine.state("b") == "exited"  # db runs on n2 now: left for the reconciler to remove


async def test_the_deadline_counts_from_the_renewals_stamp_not_its_answer() -> None:
    clock, engine = FakeClock(), Engine()
    engine.run("a", "web")
    fence = _fence(clock, engine, None, {"web": NODE})
    stamped = clock.monotonic()
    await _advance(clock, 3.0)  # the answer took 3 s
    await fence.contact(stamped)
    assert fence.left() == 7.0


async def test_a_restarted_agent_takes_the_recorded_deadline_over(tmp_path: Path) -> None:
    clock, engine, files = FakeClock(), Engine(), _files(tmp_path)
    engine.run("a", "web")
    first = _fence(clock, engine, files, {"web": NODE})
    await first.resume()
    await first.contact(clock.monotonic())  # renewed: deadline in 10 s, recorded
    await _advance(clock, 4.0)
    second = _fence(clock, engine, files, {"web": NODE})  # the agent was killed and started again
    await second.resume()
    assert second.left() == 6.0 and engine.calls == []  # the count goes on; nothing due yet
    await _advance(clock, 7.0)
    third = _fence(clock, engine, files, {"web": NODE})  # down past the deadline this time
    await third.resume()
    assert third.fenced and engine.calls == ["stop a"] and engine.timeouts["a"] == 0  # met before anything else
    await third.contact(clock.monotonic())
    assert not third.fenced and engine.calls == ["stop a", "start a"]


async def test_what_the_watchdog_stopped_starts_again_when_still_bound(tmp_path: Path) -> None:
    clock, engine, files = FakeClock(), Engine(), _files(tmp_path)
    engine.run("a", "web")
    engine.run("b", "db")
    fence = _fence(clock, engine, files, {"web": NODE, "db": "n2"})
    await fence.resume()
    await _advance(clock, 8.0)  # the agent is frozen; the watchdog meets the deadline
    await FenceWatchdog(files, engine, clock=clock).look()
    assert sorted(engine.calls) == ["stop a", "stop b"]
    await _advance(clock, 1.0)  # resumed 1 s before the deadline: nothing runs, so nothing of its own is due yet
    await fence.contact(clock.monotonic())  # but the watchdog's note says what it stopped for this deadline
    assert engine.calls[2:] == ["start a"] and fence.fences == 1 and not fence.fenced


async def test_fence_after_zero_disarms_the_record(tmp_path: Path) -> None:
    clock, engine, files = FakeClock(), Engine(), _files(tmp_path)
    files.write_deadline(Deadline(at=0.0, boot_id=BOOT, fence_after=10.0, stop_timeout=1))  # an earlier run's
    fence = SelfFence(
        fence_after=0.0,
        clock=clock,
        projects=Runtime(engine),  # type: ignore[arg-type]  # a stand-in of the projects adapter
        client=None,  # type: ignore[arg-type]  # never called: nothing is fenced
        node=NODE,
        files=files,
    )
    await fence.resume()
    recorded = files.read_deadline()
    assert recorded is not None and not recorded.armed


# ---- the heartbeat's stamp -------------------------------------------------------------------------------------


async def test_a_heartbeat_reports_when_its_renewal_was_stamped() -> None:
    clock = FakeClock()
    api = FakeApi(clock=clock)
    node = v1.Node()
    node.metadata.name = NODE
    await api.nodes.create(node)
    update = api.leases.update

    async def slow_update(lease: v1.Lease) -> v1.Lease:
        clock.advance(3.0)  # the renewal's answer takes 3 s
        return await update(lease)

    api.leases.update = slow_update  # type: ignore[method-assign]  # a slow server
    stamps: list[float] = []

    async def contact(stamped: float) -> None:
        stamps.append(stamped)

    beat = Heartbeat(api, None, AgentConfig(server="x", node_name=NODE), clock=clock, on_contact=contact)  # type: ignore[arg-type]  # a fake client, no registrar: the Node exists
    await beat.beat()  # creates the Lease
    first = clock.monotonic()
    await beat.beat()  # renews it, slowly
    assert stamps == [0.0, first] and clock.monotonic() == first + 3.0


def test_the_watchdog_refuses_a_bad_node_name_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        watchdog_main(["--fence-dir", "/nonexistent", "--node-name", "not_a_node"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("cara-fence-watchdog: invalid --node-name 'not_a_node'") and err.count("\n") == 1


async def test_a_record_that_cannot_be_written_is_kept_as_the_problem_until_a_write_succeeds(tmp_path: Path) -> None:
    clock, engine = FakeClock(), Engine()
    blocked = tmp_path / "fence"
    blocked.write_text("a file where the record's directory should be")
    fence = _fence(clock, engine, FenceFiles(blocked, NODE, boot_id=BOOT), {})
    await fence.resume()
    assert fence.record_problem.startswith("FileExistsError") and fence.record_changed.is_set()
    fence.record_changed.clear()
    await fence.contact(clock.monotonic())
    assert not fence.record_changed.is_set()  # the same problem: no change to report
    blocked.unlink()
    await fence.contact(clock.monotonic())
    assert fence.record_problem == "" and fence.record_changed.is_set()
    assert FenceFiles(blocked, NODE, boot_id=BOOT).read_deadline() == fence.deadline
