"""The ProjectSet controller's pure parts: the rollout step (scale, RollingUpdate, Recreate, pause, hold), the
deletion order, and the progress deadline on an injected clock."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.controllers.projectset import progress
from caravanserai.controllers.projectset.plan import Replica, deletion_order, plan
from caravanserai.project.replicas import RollingBounds

OLD, NEW = "old", "new"


def fleet(revision: str, n: int, *, available: bool = True, start: int = 0) -> list[Replica]:
    return [
        Replica(
            f"{revision}-{i}",
            revision,
            created=float(i),
            scheduled=True,
            running=True,
            ready=available,
            available=available,
        )
        for i in range(start, start + n)
    ]


SURGE_TWO = RollingBounds(2, 0)


def step(replicas: list[Replica], bounds: RollingBounds = SURGE_TWO, desired: int = 10, **kw: object):  # type: ignore[no-untyped-def]  # the Step, as plan returns it
    return plan(
        replicas,
        desired=desired,
        revision=NEW,
        strategy=str(kw.pop("strategy", v1.ROLLING_UPDATE)),
        bounds=bounds,
        **kw,
    )  # type: ignore[arg-type]  # the remaining keywords are plan's flags


def test_rolling_update_of_ten_with_surge_two_and_no_unavailability() -> None:
    first = step(fleet(OLD, 10))
    assert (first.create, first.delete) == (2, ())
    waiting = step(fleet(OLD, 10) + fleet(NEW, 2, available=False))
    assert (waiting.create, waiting.delete) == (0, ())  # the new ones are not available yet: nothing goes
    ready = step(fleet(OLD, 10) + fleet(NEW, 2))
    assert ready.create == 0 and len(ready.delete) == 2 and all(n.startswith(OLD) for n in ready.delete)
    after = step(fleet(OLD, 8) + fleet(NEW, 2))
    assert (after.create, after.delete) == (2, ())


def test_rolling_update_with_unavailability_deletes_at_once_and_unhealthy_old_ones_first() -> None:
    replicas = fleet(OLD, 3) + fleet(OLD, 1, available=False, start=3)
    s = step(replicas, RollingBounds(1, 1), desired=4)
    assert s.create == 1
    assert s.delete == ("old-3",)  # the unavailable one first; an available one would leave fewer than 3
    later = step(fleet(OLD, 3) + fleet(NEW, 1), RollingBounds(1, 1), desired=4)
    assert later.create == 1 and len(later.delete) == 1  # 4 available, 3 needed: one old one goes, one new comes


def test_a_new_revision_that_never_gets_ready_stops_the_rollout() -> None:
    s = step(fleet(OLD, 4) + fleet(NEW, 1, available=False), RollingBounds(1, 1), desired=4)
    assert s.create == 0 and len(s.delete) == 1
    stuck = step(fleet(OLD, 3) + fleet(NEW, 2, available=False), RollingBounds(1, 1), desired=4)
    assert stuck.empty


def test_recreate_deletes_every_old_one_then_creates() -> None:
    s = step(fleet(OLD, 3), desired=3, strategy=v1.RECREATE)
    assert s.create == 0 and len(s.delete) == 3
    leaving = [Replica("old-0", OLD, created=0.0, terminating=True)]
    assert step(leaving, desired=3, strategy=v1.RECREATE).empty
    assert step([], desired=3, strategy=v1.RECREATE).create == 3


def test_scale_pause_and_hold() -> None:
    assert step(fleet(NEW, 2), desired=5).create == 3
    down = step([*fleet(NEW, 5), Replica("pending", NEW, created=9.0)], desired=3)
    assert down.delete[0] == "pending" and len(down.delete) == 3
    paused = step(fleet(OLD, 2), desired=3, paused=True, current=OLD)
    assert (paused.revision, paused.create, paused.delete) == (OLD, 1, ())
    failed = [*fleet(OLD, 3), *fleet(NEW, 1, available=False)]  # a rollout to NEW stopped at its deadline
    assert step(failed, desired=3, hold=True).empty  # the update stops where it is
    up = step(failed, desired=5, hold=True, current=OLD)
    assert (up.revision, up.create, up.delete) == (OLD, 2, ())  # scaling still works, with the serving template
    down = step(failed, desired=1, hold=True, current=OLD)
    assert down.create == 0 and len(down.delete) == 2 and all(name.startswith(OLD) for name in down.delete)
    only = step(fleet(NEW, 2, available=False), desired=3, hold=True)  # Recreate left nothing else: scale it
    assert (only.revision, only.create) == (NEW, 1)


def test_deletion_order_prefers_unscheduled_then_not_ready_then_newest() -> None:
    replicas = [
        Replica("old-ready", NEW, created=1.0, scheduled=True, running=True, ready=True, available=True),
        Replica("new-ready", NEW, created=5.0, scheduled=True, running=True, ready=True, available=True),
        Replica("not-ready", NEW, created=0.0, scheduled=True, running=True),
        Replica("unscheduled", NEW, created=0.0),
    ]
    assert [r.name for r in deletion_order(replicas)] == ["unscheduled", "not-ready", "new-ready", "old-ready"]


def test_progress_deadline_marks_the_rollout_failed_on_the_injected_clock() -> None:
    s = v1.ProjectSet()
    s.metadata.name, s.metadata.generation = "web", 2
    s.spec.replicas, s.spec.progress_deadline_seconds = 2, 60
    s.spec.template.spec.services.add(name="main", image="x")
    replicas = fleet(OLD, 2) + fleet(NEW, 1, available=False)
    status, due = progress.next_status(s, replicas, revision=NEW, disruptions_allowed=None, now=1000.0)
    assert due == 60.0 and not progress.failed(status, NEW)
    s.status.CopyFrom(status)
    status, due = progress.next_status(s, replicas, revision=NEW, disruptions_allowed=None, now=1030.0)
    assert due == 30.0  # no progress: the deadline still counts from 1000
    s.status.CopyFrom(status)
    status, due = progress.next_status(s, replicas, revision=NEW, disruptions_allowed=None, now=1060.0)
    assert due is None and progress.failed(status, NEW)
    found = meta.get_condition(status.conditions, v1.CONDITION_PROGRESSING)
    assert found is not None and found.status == v1.FALSE and "no progress for 60s" in found.message
    assert not progress.failed(status, "another")  # a new template starts a new rollout
    assert [r.revision for r in status.revisions] == [1] and status.disruptions_allowed == -1


def test_a_shortfall_after_the_rollout_runs_no_deadline_but_a_new_revision_does() -> None:
    s = v1.ProjectSet()
    s.metadata.name, s.metadata.generation = "web", 1
    s.spec.replicas, s.spec.progress_deadline_seconds = 2, 60
    s.spec.template.spec.services.add(name="main", image="x")
    status, due = progress.next_status(s, fleet(NEW, 2), revision=NEW, disruptions_allowed=None, now=1000.0)
    assert due is None and progress.rolled_out(status, NEW)
    s.status.CopyFrom(status)
    drained = fleet(NEW, 1) + fleet(NEW, 1, available=False, start=1)  # one replica moved by a drain, not ready yet
    for now in (1001.0, 2000.0):  # long past the deadline
        status, due = progress.next_status(s, drained, revision=NEW, disruptions_allowed=None, now=now)
        s.status.CopyFrom(status)
        found = meta.get_condition(status.conditions, v1.CONDITION_PROGRESSING)
        assert due is None and not progress.failed(status, NEW) and found is not None
        assert (found.status, found.reason) == (v1.TRUE, progress.REASON_AVAILABLE)
    available = meta.get_condition(status.conditions, v1.CONDITION_AVAILABLE)
    assert available is not None and "1 of 2 replicas available" in available.message
    # A new template is a rollout again: its deadline runs.
    status, due = progress.next_status(s, drained, revision="newer", disruptions_allowed=None, now=2001.0)
    found = meta.get_condition(status.conditions, v1.CONDITION_PROGRESSING)
    assert due == 60.0 and found is not None and found.reason == progress.REASON_UPDATING
