"""A move with backed-up volumes through the project strategy: the node the move waits for may write
`lifecycle.finish_move`'s status (back to Pending, unbound), which the phase table accepts; no node may unbind a
project any other way; the volumes' status, the move and the placement estimates survive status writes."""

from __future__ import annotations

import pytest

from caravanserai import meta, v1
from caravanserai.apiserver.auth import Authorizer
from caravanserai.apiserver.kinds import builtin_kinds
from caravanserai.apiserver.kinds.project import STRATEGY, finishes_move
from caravanserai.errors import FailedPrecondition, Forbidden
from caravanserai.process.identity import Identity
from caravanserai.project import lifecycle
from caravanserai.testing import builders

NOW = 1_900_000_000.0


def moving(phase: str = v1.RUNNING, node: str = "n1") -> v1.Project:
    """A project bound to `node` in `phase` with a backed-up volume, asked to move (`status.move` set)."""
    project = builders.project("wiki")
    project.metadata.resource_version = "7"
    volume = project.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT)
    volume.backup.repository = "offsite"
    volume.backup.every = "1m"
    volume.backup.keep.last = 3
    lifecycle.created(project, now=NOW)
    project = lifecycle.bind(project, node, now=NOW)
    if phase == v1.RUNNING:
        project = lifecycle.run(project, reason="Started", message="every service runs", now=NOW)
    project.status.volumes.add(name="data", epoch=f"{node}/0123abcd", node=node)
    moved = lifecycle.move(
        project, reason=lifecycle.REASON_NODE_DRAINED, message="drained", now=NOW, handoff_until=NOW + 300
    )
    assert moved.status.HasField("move") and moved.status.node_ref == node
    return moved


def update_status(who: str, old: v1.Project, new: v1.Project) -> v1.Project:
    """What the apiserver does on UpdateStatus: authorize, then merge and check against the phase table."""
    Authorizer(builtin_kinds()).check(Identity(who), "update_status", "projects", name="wiki", obj=new, old=old)
    return STRATEGY.prepare_status(old, new, now=NOW + 1)


@pytest.mark.parametrize("phase", [v1.SCHEDULED, v1.RUNNING])
def test_the_node_a_move_waits_for_writes_finish_move(phase: str) -> None:
    old = moving(phase)
    done = lifecycle.finish_move(old, handoff={"data": "4f1c2a9b" * 8}, now=NOW + 1)
    assert finishes_move(old, done)
    stored = update_status("node:n1", old, done)
    assert stored.status.phase == v1.PENDING and not stored.status.node_ref and not stored.status.HasField("move")
    assert stored.status.volumes[0].handoff_snapshot == "4f1c2a9b" * 8
    assert stored.status.volumes[0].epoch == "n1/0123abcd"  # the rest of the volume's status is kept
    late = lifecycle.finish_move(old, handoff={}, now=NOW + 400, note="no final backup: the deadline passed")
    update_status("node:n1", old, late)


def test_no_node_unbinds_a_project_otherwise() -> None:
    old = moving()
    done = lifecycle.finish_move(old, handoff={}, now=NOW + 1)
    with pytest.raises(Forbidden):
        update_status("node:n2", old, done)  # not its project
    not_moving = meta.copy(old)
    not_moving.status.ClearField("move")
    with pytest.raises(Forbidden):  # no move asked of it: a node cannot send its project away
        update_status("node:n1", not_moving, lifecycle.return_to_pending(not_moving, reason="x", message="y", now=NOW))
    keeps_move = meta.copy(done)
    keeps_move.status.move.CopyFrom(old.status.move)
    with pytest.raises(Forbidden):
        update_status("node:n1", old, keeps_move)
    elsewhere = meta.copy(old)
    elsewhere.status.node_ref = "n2"
    with pytest.raises(Forbidden):  # rebinding to another node is no finish
        update_status("node:n1", old, elsewhere)
    failed = lifecycle.fail(old, reason="Crashed", message="x", now=NOW)
    failed.status.node_ref = ""
    with pytest.raises(Forbidden):  # unbound, but not Pending
        update_status("node:n1", old, failed)


def test_the_phase_table_still_guards_a_finish() -> None:
    old = lifecycle.mark_terminating(moving(), now=NOW)  # deleted while moving: Terminating → Pending is refused
    with pytest.raises(FailedPrecondition):
        update_status("node:n1", old, lifecycle.finish_move(old, handoff={}, now=NOW + 1))


def test_volumes_move_and_placement_survive_status_writes() -> None:
    old = moving()
    new = meta.copy(old)
    new.status.placement.chosen.node = "n1"
    new.status.placement.chosen.start_delay_seconds = 12.5
    new.status.placement.runner_up.node = "n2"
    record = new.status.volumes[0].last_backup
    record.id = "4f1c2a9b" * 8
    record.size_bytes = 2048
    new.status.volumes[0].message = "restored snapshot 4f1c2a9b taken 3 min ago on n0"
    stored = update_status("node:n1", old, new)
    assert stored.status.placement == new.status.placement
    assert stored.status.volumes == new.status.volumes
    assert stored.status.move == old.status.move
    assert stored.status == new.status
