"""The soak's judgements on made-up observations: lost writes, leaks, overlaps, convergence, durations."""

from __future__ import annotations

import random

import pytest

from caravanserai import v1
from caravanserai.testing import FakeClock, builders
from support.fleet import EngineContainer
from support.soak.config import SoakConfig, parse_duration
from support.soak.faults import KINDS, FaultInjector
from support.soak.history import CREATE, DELETE, UPDATE, Observed, WriteLog
from support.soak.observe import Observer, project_problem, unconverged
from support.soak.overlaps import longest_overlap
from support.soak.sampler import Incarnation, Limits, leaking
from support.soak.snapshot import Snapshot


def test_an_acknowledged_write_read_back_older_is_lost() -> None:
    log = WriteLog()
    log.acked("project", "p", CREATE, 1, "10")
    log.acked("project", "p", UPDATE, 2, "12")
    record = log.records[("project", "p")]
    assert log.check(record, Observed(12, 2)) is None
    assert log.check(record, Observed(13, 2)) is None  # a status write since: newer, same seq
    assert "acknowledged seq 2 but read seq 1" in (log.check(record, Observed(12, 1)) or "")
    assert "resource version 11 < acknowledged 12" in (log.check(record, Observed(11, 2)) or "")
    assert "the object is gone" in (log.check(record, None) or "")


def test_an_ambiguous_write_may_or_may_not_have_been_applied() -> None:
    log = WriteLog()
    log.acked("project", "p", CREATE, 1, "10")
    log.unknown("project", "p", UPDATE, 2)
    record = log.records[("project", "p")]
    assert log.check(record, Observed(10, 1)) is None
    assert log.check(record, Observed(11, 2)) is None
    log.unknown("project", "q", CREATE, 3)
    assert log.check(log.records[("project", "q")], None) is None  # never acknowledged: nothing to lose
    log.acked("project", "p", DELETE, 4, "")
    assert log.check(record, None) is None
    assert "is back" in (log.check(record, Observed(20, 2)) or "")
    log.unknown("project", "p", CREATE, 5)  # the name reused, not known whether it was created
    assert log.check(record, Observed(21, 5)) is None


def test_a_leak_is_growth_that_goes_on_in_the_late_half() -> None:
    minutes = [float(60 * i) for i in range(31)]
    assert leaking([(t, 100 + t / 30) for t in minutes], 30.0, 8.0)  # 2 MiB a minute for half an hour
    assert not leaking([(t, 100 + t / 600) for t in minutes], 30.0, 8.0)  # 6 MiB/h: below the slope limit
    assert not leaking([(t, 100 + min(t, 840) / 20) for t in minutes], 30.0, 8.0)  # fills, then levels off
    assert leaking([(t, 100 + max(0, t - 900) / 30) for t in minutes], 30.0, 8.0)  # flat, then climbs
    assert not leaking([(t, 100 + t / 30) for t in minutes[:6]], 30.0, 8.0)  # steep, but 5 MiB late: the floor


def test_an_etcd_member_is_judged_by_its_database_in_use_too() -> None:
    limits = Limits(warmup=60.0, window=120.0)
    member = Incarnation("etcd-m0", 1, [(float(t), 40.0, 20) for t in range(0, 1200, 5)])
    member.db_samples = [(float(t), 64.0, 2 + t / 30, t) for t in range(0, 1200, 30)]  # RSS flat, data climbing
    figures = member.figures(limits)
    assert (figures["rss_leak"], figures["db_leak"]) == (False, True)
    assert figures["db_in_use_mib_per_hour_late"] == pytest.approx(120.0)
    assert figures["raft_entries_per_s"] == 1.0
    member.db_samples = [(float(t), 64.0, 2 + min(t, 300) / 30, t) for t in range(0, 1200, 30)]  # compacted: flat
    assert member.figures(limits)["db_leak"] is False


def _container(
    project: str, *, host_running: bool = True, generation: int = 1, uid: str = "u1", cid: str = "id"
) -> EngineContainer:
    labels = {
        "caravanserai.io/project": project,
        "caravanserai.io/service": "main",
        "caravanserai.io/generation": str(generation),
        "caravanserai.io/project-uid": uid,
    }
    return EngineContainer(cid, f"cara_{project}_main", "running" if host_running else "exited", labels)


def _running(name: str, node: str) -> v1.Project:
    project = builders.project(name, services=["main"])
    project.metadata.uid, project.metadata.generation = "u1", 1
    project.status.phase, project.status.node_ref = v1.RUNNING, node
    return project


def test_a_project_has_converged_with_one_current_copy_on_its_node() -> None:
    project = _running("soak-1", "w0")
    assert project_problem(project, [("w0", _container("soak-1"))]) is None
    assert "running on ['w0', 'w1']" in (
        project_problem(project, [("w0", _container("soak-1")), ("w1", _container("soak-1"))]) or ""
    )
    assert "generation 0 != 1" in (project_problem(project, [("w0", _container("soak-1", generation=0))]) or "")
    snap = Snapshot(0.0, {"soak-1": project}, [("w2", _container("soak-2"))])
    assert unconverged(snap, ["soak-2"]) == {"soak-1": "service main: running on no host, bound to w0",
                                            "soak-2": "deleted, still running on ['w2']"}  # fmt: skip
    assert unconverged(Snapshot(0.0, None, []), []) == {"*": "the API did not answer"}


async def test_overlaps_are_sampled_then_taken_from_the_engines_times() -> None:
    engine = {("w0", "a"): (100.0, 103.5), ("w1", "b"): (101.0, 0.0)}  # b still runs

    async def times(host: str, container_id: str) -> tuple[float, float] | None:
        return engine.get((host, container_id))

    observer = Observer(fleet=None, client=None, prefix="soak-", clock=FakeClock(start=200.0), times=times)  # type: ignore[arg-type]  # no fleet: only the checks run
    a, b = ("w0", _container("soak-1", cid="a")), ("w1", _container("soak-1", cid="b"))
    for at, rows in [(0.0, [a]), (1.0, [a, b]), (2.0, [a, b]), (3.5, [b])]:
        await observer.observe(Snapshot(at, None, rows), [], {})
    [episode] = observer.overlaps
    assert (episode.project, episode.hosts, episode.sampled, episode.measured) == ("soak-1", ["w0", "w1"], 2.5, 2.5)
    engine.pop(("w0", "a"))  # removed since: the sampled length stands
    for at, rows in [(4.0, [a, b]), (5.0, [b])]:
        await observer.observe(Snapshot(at, None, rows), [], {})
    assert (observer.overlaps[1].measured, observer.overlaps[1].seconds) == (None, 1.0)


def test_the_longest_overlap_is_between_hosts() -> None:
    assert longest_overlap({"w0": [(0.0, 10.0)], "w1": [(8.0, 20.0), (2.0, 5.0)]}) == 3.0
    assert longest_overlap({"w0": [(0.0, 1.0), (0.5, 9.0)]}) == 0.0  # one host: a restart, not a duplicate
    assert longest_overlap({"w0": [(0.0, 1.0)], "w1": [(2.0, 3.0)]}) <= 0.0


@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("5m", 300.0), ("1.5h", 5400.0)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_a_bad_duration_names_itself() -> None:
    with pytest.raises(ValueError, match="'5 minutes'"):
        parse_duration("5 minutes")


def test_every_fault_kind_comes_once_per_bag() -> None:
    injector = FaultInjector(None, SoakConfig(), clock=FakeClock(), rng=random.Random(7))  # type: ignore[arg-type]  # no fleet: only the checks run
    drawn = [injector.next_kind() for _ in range(2 * len(KINDS))]
    assert sorted(drawn[: len(KINDS)]) == sorted(KINDS) == sorted(drawn[len(KINDS) :])


def test_the_engines_are_reported_but_not_judged() -> None:
    samples = [(float(t), 100.0 + t / 10, 20 + t // 5) for t in range(0, 400, 5)]  # fds: 12 an minute
    engine, apiserver = Incarnation("dockerd-w0", 1, list(samples)), Incarnation("apiserver-cp0", 2, list(samples))
    limits = Limits(warmup=60.0, window=120.0)
    assert (engine.figures(limits)["judged"], engine.figures(limits)["fd_leak"]) == (False, False)
    assert engine.figures(limits)["fds_per_hour_late"] == apiserver.figures(limits)["fds_per_hour_late"]
    assert (apiserver.figures(limits)["judged"], apiserver.figures(limits)["fd_leak"]) == (True, True)
    assert apiserver.figures(Limits())["judged"] is False  # 400 s: not watched past the default warm-up
