"""The lifecycle table and its constructors: every ordered pair of phases is either allowed or refused by
`lifecycle.check`, and each constructor makes exactly the change its name says."""

from __future__ import annotations

import itertools

import pytest

from caravanserai import meta, v1
from caravanserai.errors import FailedPrecondition
from caravanserai.project import lifecycle
from caravanserai.testing.builders import project

# The whole table, written out: (before, after) pairs a status update may make. Anything else is refused.
ALLOWED = {
    (v1.QUEUED, v1.QUEUED),
    (v1.QUEUED, v1.PENDING),
    (v1.PENDING, v1.PENDING),
    (v1.PENDING, v1.SCHEDULED),
    (v1.PENDING, v1.QUEUED),
    (v1.SCHEDULED, v1.QUEUED),
    (v1.RUNNING, v1.QUEUED),
    (v1.SCHEDULED, v1.SCHEDULED),
    (v1.SCHEDULED, v1.RUNNING),
    (v1.SCHEDULED, v1.SUCCEEDED),
    (v1.SCHEDULED, v1.FAILED),
    (v1.SCHEDULED, v1.PENDING),
    (v1.RUNNING, v1.RUNNING),
    (v1.RUNNING, v1.SUCCEEDED),
    (v1.RUNNING, v1.FAILED),
    (v1.RUNNING, v1.PENDING),
    (v1.SUCCEEDED, v1.SUCCEEDED),
    (v1.SUCCEEDED, v1.PENDING),
    (v1.FAILED, v1.FAILED),
    (v1.FAILED, v1.PENDING),
    (v1.TERMINATING, v1.TERMINATING),
    (v1.TERMINATING, v1.TERMINATED),
}
# Entered only through Delete, never by a status update.
BY_DELETE = {(before, v1.TERMINATING) for before in (v1.SCHEDULED, v1.RUNNING, v1.SUCCEEDED, v1.FAILED)}


def in_phase(phase: str, *, deleting: bool = False) -> v1.Project:
    p = project("p")
    p.metadata.generation = 1
    meta.set_phase(p, phase, reason="Test", message="test", now=1.0)
    if phase not in (v1.QUEUED, v1.PENDING):
        p.status.node_ref = "n1"
    if deleting:
        p.metadata.deletion_timestamp.FromSeconds(1)
    return p


def moved(p: v1.Project, phase: str) -> v1.Project:
    out = meta.copy(p)
    out.status.phase = phase
    out.status.node_ref = "" if phase in (v1.QUEUED, v1.PENDING) else "n1"
    return out


@pytest.mark.parametrize(("before", "after"), list(itertools.product(v1.PHASES, repeat=2)))
def test_every_pair_is_allowed_or_refused_by_the_table(before: str, after: str) -> None:
    old = in_phase(before)
    new = moved(old, after)
    if before == after == v1.TERMINATED:
        new.status.services.add(name="late")  # any change of a Terminated status
    expected = (before, after) in ALLOWED
    assert lifecycle.is_allowed(before, after) == (expected or (before, after) in BY_DELETE)
    if expected:
        lifecycle.check(old, new, now=2.0)
        if before != after:
            assert meta.get_condition(new.status.conditions, v1.CONDITION_PHASE).reason == after
    else:
        with pytest.raises(FailedPrecondition):
            lifecycle.check(old, new, now=2.0)


@pytest.mark.parametrize("after", [v1.SCHEDULED, v1.RUNNING, v1.PENDING])
def test_a_project_being_deleted_is_never_bound_started_or_moved(after: str) -> None:
    before = v1.PENDING if after == v1.SCHEDULED else v1.SCHEDULED if after == v1.RUNNING else v1.RUNNING
    old = in_phase(before, deleting=True)
    with pytest.raises(FailedPrecondition, match="being deleted"):
        lifecycle.check(old, moved(old, after), now=2.0)


def test_constructors_make_the_change_their_name_says_and_leave_the_input_alone() -> None:
    pending = in_phase(v1.PENDING)
    pending.metadata.generation = 4
    before = meta.copy(pending)
    bound = lifecycle.bind(pending, "n2", now=5.0)
    assert pending == before
    assert (bound.status.phase, bound.status.node_ref, bound.status.scheduled_generation) == (v1.SCHEDULED, "n2", 4)
    assert meta.get_condition(bound.status.conditions, v1.CONDITION_SCHEDULED).status == v1.TRUE
    stuck = lifecycle.unschedulable(pending, "0/1 nodes", now=5.0)
    assert stuck.status.phase == v1.PENDING
    assert meta.get_condition(stuck.status.conditions, v1.CONDITION_PHASE).reason == lifecycle.REASON_UNSCHEDULABLE

    moved_away = lifecycle.return_to_pending(
        bound, reason="NodeDrained", message="drained", now=6.0, handoff_until=66.0
    )
    lifecycle.check(bound, moved_away, now=6.0)
    assert (moved_away.status.node_ref, moved_away.status.previous_node_ref) == ("", "n2")
    assert moved_away.status.handoff_deadline.seconds == 66
    rebound = lifecycle.bind(moved_away, "n3", now=7.0)
    starting = lifecycle.run(rebound, reason="ContainersRunning", message="1 running", now=8.0, ready=False)
    lifecycle.check(rebound, starting, now=8.0)
    assert (starting.status.phase, starting.status.previous_node_ref) == (v1.RUNNING, "n2")  # the old copy serves
    ready = lifecycle.handed_over(starting)
    assert ready.status.previous_node_ref == "" and not ready.status.HasField("handoff_deadline")
    running = lifecycle.run(rebound, reason="ContainersRunning", message="1 running", now=8.0)
    assert running.status.previous_node_ref == "" and not running.status.HasField("handoff_deadline")

    for make, phase in ((lifecycle.fail, v1.FAILED), (lifecycle.succeed, v1.SUCCEEDED)):
        out = make(running, reason="R", message="m", now=9.0)
        lifecycle.check(running, out, now=9.0)
        assert out.status.phase == phase and out.status.node_ref == "n3"
    terminating = lifecycle.mark_terminating(running, now=10.0)
    assert terminating.status.phase == v1.TERMINATING and terminating.metadata.HasField("deletion_timestamp")
    done = lifecycle.terminate(terminating, reason="ResourcesRemoved", message="gone", now=11.0)
    lifecycle.check(terminating, done, now=11.0)
    assert done.status.phase == v1.TERMINATED


@pytest.mark.parametrize(
    ("phase", "plan"),
    [
        (v1.PENDING, "remove"),
        (v1.SCHEDULED, "mark"),
        (v1.RUNNING, "mark"),
        (v1.SUCCEEDED, "mark"),
        (v1.FAILED, "mark"),
        (v1.TERMINATING, "noop"),
        (v1.TERMINATED, "remove"),
    ],
)
def test_delete_plan_routes_bound_projects_through_terminating(phase: str, plan: str) -> None:
    assert lifecycle.delete_plan(in_phase(phase), force=False) == plan
    assert lifecycle.delete_plan(in_phase(phase), force=True) == "remove"


def _with_backup(p: v1.Project) -> v1.Project:
    volume = p.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT)
    volume.backup.repository = "offsite"
    volume.backup.every = "5m"
    return p


def test_move_without_backed_up_volumes_returns_to_pending_with_a_hand_off() -> None:
    bound = lifecycle.bind(project("web"), "node-a", now=10.0)
    moved = lifecycle.move(
        bound, reason=lifecycle.REASON_NODE_DRAINED, message="drained", now=20.0, handoff_until=320.0
    )
    assert moved.status.phase == v1.PENDING and moved.status.previous_node_ref == "node-a"
    assert not moved.status.HasField("move")


def test_move_with_backed_up_volumes_stays_bound_until_the_final_backup_is_handed_over() -> None:
    bound = lifecycle.bind(_with_backup(project("db")), "node-a", now=10.0)
    asked = lifecycle.move(
        bound, reason=lifecycle.REASON_NODE_DRAINED, message="drained", now=20.0, handoff_until=320.0
    )
    assert asked.status.phase == v1.SCHEDULED and asked.status.node_ref == "node-a"
    assert asked.status.move.node == "node-a" and asked.status.move.reason == lifecycle.REASON_NODE_DRAINED
    again = lifecycle.move(
        asked, reason=lifecycle.REASON_TAINT_EVICTION, message="tainted", now=30.0, handoff_until=9.0
    )
    assert again.status.move == asked.status.move  # the first request stands
    done = lifecycle.finish_move(asked, handoff={"data": "4f1c" * 16}, now=40.0)
    assert done.status.phase == v1.PENDING and not done.status.node_ref and not done.status.HasField("move")
    assert done.status.previous_node_ref == "node-a" and not done.status.HasField("handoff_deadline")
    assert done.status.volumes[0].name == "data" and done.status.volumes[0].handoff_snapshot == "4f1c" * 16
    lost = lifecycle.return_to_pending(asked, reason="NodeLost", message="lost", now=50.0)
    assert not lost.status.HasField("move")


def test_a_return_to_pending_drops_the_estimates_of_the_binding_it_ends() -> None:
    bound = lifecycle.bind(project("web"), "node-a", now=10.0)
    bound.status.placement.chosen.node = "node-a"
    bound.status.placement.runner_up.node = "node-b"
    back = lifecycle.return_to_pending(bound, reason="NodeLost", message="lost", now=20.0)
    assert not back.status.HasField("placement")


def test_preempted_turns_false_once_the_victim_is_bound_again() -> None:
    victim = lifecycle.bind(project("batch"), "n1", now=10.0)
    victim = lifecycle.run(victim, reason="Started", message="", now=11.0)
    victim = lifecycle.preempt(victim, preemptor="urgent", message="to make room", now=20.0, deadline=80.0)
    victim = lifecycle.finish_move(victim, handoff={}, now=21.0)
    preempted = meta.get_condition(victim.status.conditions, v1.CONDITION_PREEMPTED)
    assert victim.status.phase == v1.PENDING
    assert preempted is not None and (preempted.status, preempted.reason) == (v1.TRUE, lifecycle.REASON_PREEMPTED)

    again = lifecycle.bind(victim, "n2", now=30.0)
    after = meta.get_condition(again.status.conditions, v1.CONDITION_PREEMPTED)
    assert after is not None and (after.status, after.reason) == (v1.FALSE, lifecycle.REASON_RESCHEDULED)
    assert "n2" in after.message and "Preempted by project urgent" in after.message
    assert after.last_transition_time.seconds == 30
    never = lifecycle.bind(project("fresh"), "n1", now=30.0)  # never preempted: no such condition appears
    assert meta.get_condition(never.status.conditions, v1.CONDITION_PREEMPTED) is None


def test_reclaim_sends_a_bound_project_back_to_the_queue_unbound_and_says_for_whom() -> None:
    running = in_phase(v1.RUNNING)
    before = meta.copy(running)
    out = lifecycle.reclaim(running, preemptor="team-a/urgent", message="team-a needs it", now=5.0, deadline=65.0)
    assert running == before
    lifecycle.check(running, out, now=5.0)
    assert (out.status.phase, out.status.node_ref, out.status.previous_node_ref) == (v1.QUEUED, "", "")
    assert not out.status.HasField("handoff_deadline")  # no hand-off: its node removes the containers at once
    preempted = meta.get_condition(out.status.conditions, v1.CONDITION_PREEMPTED)
    assert preempted.reason == lifecycle.REASON_QUOTA_RECLAIMED and "team-a/urgent" in preempted.message
    pending = lifecycle.reclaim(in_phase(v1.PENDING), preemptor="x/y", message="m", now=5.0, deadline=6.0)
    assert pending.status.phase == v1.QUEUED


def test_a_reclaimed_project_with_backed_up_volumes_moves_first_and_lands_in_the_queue() -> None:
    running = in_phase(v1.RUNNING)
    running.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT).backup.repository = "repo"
    moving = lifecycle.reclaim(running, preemptor="team-a/urgent", message="back", now=5.0, deadline=65.0)
    assert (moving.status.phase, moving.status.node_ref, moving.status.move.node) == (v1.RUNNING, "n1", "n1")
    assert lifecycle.lands_in(moving) == v1.QUEUED
    done = lifecycle.finish_move(moving, handoff={"data": "snap1"}, now=7.0)
    lifecycle.check(moving, done, now=7.0)
    assert (done.status.phase, done.status.node_ref, done.status.previous_node_ref) == (v1.QUEUED, "", "n1")
    drained = lifecycle.move(running, reason="NodeDrained", message="m", now=5.0, handoff_until=9.0)
    assert lifecycle.lands_in(drained) == v1.PENDING
    assert lifecycle.finish_move(drained, handoff={}, now=7.0).status.phase == v1.PENDING


def test_a_project_being_deleted_is_never_queued_again() -> None:
    old = in_phase(v1.RUNNING, deleting=True)
    with pytest.raises(FailedPrecondition, match="being deleted"):
        lifecycle.check(old, moved(old, v1.QUEUED), now=2.0)
