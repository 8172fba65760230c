"""The soak's duplicate verdicts on made-up observations: hand-offs told from unplanned moves, containers past their
node's fence deadline, and hand-offs excused while their old agent was out."""

from __future__ import annotations

from caravanserai import v1
from caravanserai.testing import FakeClock, builders
from support.fleet import EngineContainer
from support.soak.config import SoakConfig
from support.soak.duplicates import duplicates_section, excused
from support.soak.faults import FaultEvent
from support.soak.fencecheck import FenceCheck
from support.soak.overlaps import Overlap, OverlapTracker
from support.soak.snapshot import Snapshot

WALL = 1_000.0  # wall = monotonic + WALL in these snapshots


def _copy(cid: str, project: str = "soak-1") -> EngineContainer:
    labels = {"caravanserai.io/project": project, "caravanserai.io/service": "main"}
    return EngineContainer(cid, f"cara_{project}_main", "running", labels)


def _project(node: str, phase: str = v1.RUNNING, previous: str = "") -> dict[str, v1.Project]:
    project = builders.project("soak-1", services=["main"])
    project.status.phase, project.status.node_ref, project.status.previous_node_ref = phase, node, previous
    return {"soak-1": project}


def _snap(at: float, rows: list[tuple[str, EngineContainer]], projects: dict[str, v1.Project] | None) -> Snapshot:
    return Snapshot(at, projects, rows, None, WALL + at, WALL + at)


async def _episodes(steps: list[tuple[float, list[str], dict[str, v1.Project] | None]], **kw: object) -> list[Overlap]:
    async def unknown(host: str, container_id: str) -> tuple[float, float] | None:
        return None  # removed: sampled lengths

    tracker = OverlapTracker("soak-", FakeClock(), unknown, **kw)  # type: ignore[arg-type]  # only `draining`
    for at, hosts, projects in steps:
        await tracker.observe(_snap(at, [(h, _copy(f"c-{h}")) for h in hosts], projects))
    return tracker.episodes


async def test_a_drained_project_is_a_hand_off_and_a_moved_one_is_not() -> None:
    handoff = await _episodes([
        (0.0, ["w0"], _project("w0")),
        (1.0, ["w0"], _project("", v1.PENDING, previous="w0")),  # drained: the old copy stays for the hand-off
        (2.0, ["w0", "w1"], _project("w1", v1.SCHEDULED, previous="w0")),
        (3.0, ["w0", "w1"], _project("w1")),  # ready on w1: the hand-off is over
        (5.0, ["w1"], _project("w1")),
    ])  # fmt: skip
    [episode] = handoff
    assert (episode.old_host, episode.handoff, episode.handed_over, episode.handoff_late) == ("w0", True, 1003.0, 2.0)
    unplanned = await _episodes([
        (0.0, ["w0"], _project("w0")),
        (1.0, ["w0", "w1"], _project("w1")),  # node health moved it: no previousNodeRef
        (2.0, ["w1"], _project("w1")),
    ])  # fmt: skip
    assert [(e.old_host, e.handoff, e.handoff_late) for e in unplanned] == [("w0", False, None)]
    drained = await _episodes(
        [(0.0, ["w0"], None), (1.0, ["w0", "w1"], None), (2.0, ["w1"], None)],
        draining=lambda host, at: host == "w0" and at == 1.0,
    )
    assert drained[0].handoff


def test_a_container_past_its_nodes_deadline_is_late() -> None:
    check = FenceCheck(fence_after=10.0, prefix="soak-")
    check.observe(Snapshot(0.0, None, [], {"w0": 100.0, "w1": 100.0}, 101.0))
    check.observe(Snapshot(1.0, None, [], {"w0": 95.0, "w1": 111.0}, 109.0))  # a lagging read: w0 stays at 100
    rows = [("w0", _copy("a")), ("w1", _copy("b")), ("w2", _copy("c")), ("w0", _copy("x", "other-1"))]
    check.observe(Snapshot(2.0, None, rows, None, 112.5))  # no Leases: not judged
    check.observe(Snapshot(3.0, None, rows, {}, 112.5))
    assert [(x.host, x.container, x.late) for x in check.worst] == [("w0", "a", 2.5)]  # w1 renewed, w2 unknown
    assert check.checked == 3 and check.silences == {("w0", 110.0)}


def _handoff(late: float) -> Overlap:
    episode = Overlap("soak-1", "main", ["w0", "w1"], 0.0, sampled=late + 1, old_host="w0", handoff=True)
    episode.handed_over, episode.old_finished = WALL + 10.0, WALL + 10.0 + late
    return episode


def test_a_late_hand_off_is_excused_only_while_its_old_agent_was_out() -> None:
    pause = FaultEvent("pause", "agent-w0", start=5.0, end=15.0)
    assert excused(_handoff(8.0), [pause], WALL)
    assert not excused(_handoff(8.0), [FaultEvent("pause", "agent-w1", start=5.0, end=15.0)], WALL)
    assert not excused(_handoff(8.0), [FaultEvent("kill-agent", "agent-w0", start=60.0, end=62.0)], WALL)
    assert excused(_handoff(8.0), [FaultEvent("cut", "w0", start=0.0, end=9.0)], WALL)  # back, catching up


def test_each_guarantee_has_its_verdict() -> None:
    config = SoakConfig()
    unplanned = Overlap("soak-2", "main", ["w0", "w2"], 0.0, sampled=6.0, old_host="w0")
    fence = FenceCheck(fence_after=10.0, prefix="soak-")
    fence.observe(Snapshot(0.0, None, [("w0", _copy("a"))], {"w0": 100.0}, 113.0))
    pause = FaultEvent("pause", "agent-w0", start=5.0, end=15.0)
    section, lines = duplicates_section([unplanned, _handoff(8.0), _handoff(7.0)], fence, [], config, 0.0, WALL)
    verdicts = {entry["invariant"]: entry["verdict"] for entry in lines}
    assert verdicts == {"no duplicate container beyond the fence bound": "violated",
                        "no container runs past its node's fence deadline": "violated",
                        "a hand-off's old copy goes once the new one is ready": "violated"}  # fmt: skip
    assert (section["unplanned"]["episodes"], section["handoffs"]["after_handoff_max_s"]) == (1, 8.0)
    _, lines = duplicates_section([_handoff(8.0)], FenceCheck(10.0, "soak-"), [pause], config, 0.0, WALL)
    assert {entry["verdict"] for entry in lines} == {"held"}
