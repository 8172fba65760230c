"""The pure decisions of the volumes room: which copy is current (epochs), what to do before start (plan), when a
backup is due or overdue (schedule), and what the status says (volumestatus)."""

from __future__ import annotations

import pytest

from caravanserai import meta, v1
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.records import VolumeInfo
from caravanserai.agent.volumes import epochs, plan, schedule, volumestatus
from caravanserai.agent.volumes.resticjson import Snapshot
from caravanserai.clock import seconds, timestamp
from caravanserai.project import backups
from caravanserai.text.durations import format_age

NODE = "node-b"
URL = "/srv/repo"
NEWEST = Snapshot("b" * 64, 2000.0, "node-a", ("node=node-a",))
OLDER = Snapshot("a" * 64, 1000.0, "node-a", ("node=node-a",))


def local(epoch: str = "") -> VolumeInfo:
    return VolumeInfo(name="cara_p_data_node-b", mountpoint="/m", labels={naming.LABEL_EPOCH: epoch} if epoch else {})


def state(node: str = "", epoch: str = "", handoff: str = "") -> v1.VolumeStatus:
    return v1.VolumeStatus(name="data", node=node, epoch=epoch, handoff_snapshot=handoff)


def volume(restore: str = "", request: str = "", requested_at: float = 0.0) -> v1.Volume:
    out = v1.Volume(name="data", type=v1.VOLUME_PERSISTENT, restore=restore)
    out.backup.repository, out.backup.every = "r", "10s"
    if request:
        out.restore_request.snapshot = request
        out.restore_request.requested_at.CopyFrom(timestamp(requested_at))
    return out


def test_a_copy_is_current_only_with_the_status_epoch_on_this_node() -> None:
    assert epochs.new_epoch(NODE).startswith(NODE + "/") and len(epochs.new_epoch(NODE)) == len(NODE) + 9
    assert epochs.new_epoch(NODE) != epochs.new_epoch(NODE)
    assert epochs.is_current(local("node-b/1"), state(NODE, "node-b/1"), NODE)
    assert not epochs.is_current(local("node-b/1"), state(NODE, "node-b/2"), NODE)  # half-restored or stale
    assert not epochs.is_current(local("node-b/1"), state("node-a", "node-b/1"), NODE)  # the data lives elsewhere
    assert not epochs.is_current(None, state(NODE, "node-b/1"), NODE)
    assert not epochs.is_current(local("node-b/1"), None, NODE)
    assert epochs.local_epoch(local(), NODE) == "node-b/unlabelled"
    assert epochs.is_current(local(), state(NODE, "node-b/unlabelled"), NODE)  # an adopted volume of old
    assert epochs.adoptable(local(), None) and epochs.adoptable(local(), state())
    assert not epochs.adoptable(local(), state("node-a", "node-a/1")) and not epochs.adoptable(None, None)


def test_a_current_copy_is_kept_without_asking_the_repository() -> None:
    current = state(NODE, "node-b/1")
    assert not plan.needs_listing(volume(), current, local("node-b/1"), NODE)
    assert plan.decide(volume(), current, local("node-b/1"), NODE, [], url=URL) == plan.Plan(plan.KEEP)


def test_the_hand_off_snapshot_wins_over_the_newest_and_must_exist() -> None:
    moved = state("node-a", "node-a/1", handoff=OLDER.id)
    assert plan.needs_listing(volume(), moved, None, NODE)
    assert plan.decide(volume(), moved, None, NODE, [NEWEST, OLDER], url=URL) == plan.Plan(plan.RESTORE, OLDER)
    gone = plan.decide(volume(), moved, None, NODE, [NEWEST], url=URL)
    assert gone == plan.Plan(plan.FAIL, message=f"snapshot {OLDER.id} not found in repository {URL}")


def test_latest_restores_the_newest_and_a_first_run_starts_empty_or_adopts() -> None:
    elsewhere = state("node-a", "node-a/1")
    assert plan.decide(volume(), elsewhere, local("node-b/0"), NODE, [NEWEST, OLDER], url=URL).snapshot is NEWEST
    first = plan.decide(volume(), None, None, NODE, [], url=URL)
    assert first == plan.Plan(plan.EMPTY, message="first run: no snapshot yet")
    assert plan.decide(volume(), None, local(), NODE, [], url=URL).action == plan.ADOPT  # data nobody else holds
    stale_here = plan.decide(volume(), elsewhere, local("node-b/0"), NODE, [], url=URL)
    assert stale_here.action == plan.EMPTY  # never serves a copy another node superseded


def test_restore_never_starts_empty_without_asking_the_repository() -> None:
    never = volume(restore=v1.RESTORE_NEVER)
    elsewhere = state("node-a", "node-a/1")
    assert not plan.needs_listing(never, elsewhere, None, NODE)
    assert plan.decide(never, elsewhere, None, NODE, [], url=URL) == plan.Plan(
        plan.EMPTY, message="started empty: restore is Never"
    )


def test_a_restore_request_restores_exactly_its_snapshot_once() -> None:
    current = state(NODE, "node-b/1")
    asked = volume(request=OLDER.id[:8], requested_at=50.0)
    assert plan.requested(asked, current) == timestamp(50.0)
    assert plan.needs_listing(asked, current, local("node-b/1"), NODE)
    chosen = plan.decide(asked, current, local("node-b/1"), NODE, [NEWEST, OLDER], url=URL)
    assert (chosen.action, chosen.snapshot, chosen.request, chosen.request_error) == (
        plan.RESTORE,
        OLDER,
        timestamp(50.0),
        "",
    )
    current.restore_request_handled.CopyFrom(timestamp(50.0))
    assert plan.requested(asked, current) is None  # answered already
    assert plan.requested(volume(), None) is None


def test_an_unknown_requested_snapshot_is_answered_and_the_copy_kept() -> None:
    current = state(NODE, "node-b/1")
    asked = volume(request="deadbeef", requested_at=50.0)
    chosen = plan.decide(asked, current, local("node-b/1"), NODE, [NEWEST], url=URL)
    assert chosen == plan.Plan(
        plan.KEEP, request=timestamp(50.0), request_error=f"snapshot deadbeef not found in repository {URL}"
    )


def test_backups_are_due_every_interval_and_overdue_after_a_margin() -> None:
    assert schedule.every_of(volume()) == 10.0
    assert schedule.margin(10.0) == 10.0 and schedule.margin(600.0) == 300.0
    status = state(NODE, "node-b/1")
    assert schedule.due_at(status, 10.0, started=0.0, since=100.0) == 110.0  # no backup: from the copy's making
    status.last_backup.time.CopyFrom(timestamp(200.0))
    assert schedule.due_at(status, 10.0, started=0.0, since=100.0) == 210.0
    assert schedule.due_at(status, 10.0, started=188.0, since=100.0) == 198.0  # a 12s run: the next at once
    assert schedule.overdue_at(status, 10.0, succeeded=0.0, since=100.0) == 220.0
    assert schedule.overdue_at(status, 10.0, succeeded=205.0, since=100.0) == 225.0  # one the cache lacks
    assert schedule.overdue_message(status, 10.0, now=245.0) == "last backup 45s ago, every 10s"
    assert schedule.overdue_message(None, 300.0, now=245.0) == "no backup yet, every 5m"
    assert schedule.slow_message("data", 12.4, 10.0) == (
        "a backup of data takes 12s, longer than every (10s); backups run back to back"
    )
    bad = volume()
    bad.backup.every = "often"
    with pytest.raises(ValueError, match=r"spec.volumes\[data\].backup.every"):
        schedule.every_of(bad)


def test_a_backup_request_is_due_at_once_until_answered() -> None:
    asked = volume()
    asked.backup.requested_at.CopyFrom(timestamp(300.0))
    status = state(NODE, "node-b/1")
    assert schedule.requested(asked, status) == timestamp(300.0)
    assert schedule.requested(asked, status, answered=300.0) is None
    status.backup_request_handled.CopyFrom(timestamp(300.0))
    assert schedule.requested(asked, status) is None


def test_a_restore_is_recorded_from_start_to_current_copy() -> None:
    status = v1.ProjectStatus()
    record = v1.SnapshotRecord(id="4f1c2a9b" + "0" * 56, node="node-a", time=timestamp(1000.0), size_bytes=10)
    volumestatus.begin_restore(status, "data", record, total=10, node=NODE, now=1180.0)
    restoring = meta.get_condition(status.conditions, v1.CONDITION_RESTORING)
    assert restoring is not None and restoring.status == v1.TRUE
    assert restoring.message == "volume data: restoring snapshot 4f1c2a9b taken 3 min ago on node-a"
    volumestatus.restore_progress(status, "data", 4)
    assert (status.volumes[0].restoring.bytes_done, status.volumes[0].restoring.bytes_total) == (4, 10)
    assert not status.volumes[0].epoch  # not before the copy is complete
    volumestatus.restored(status, "data", epoch="node-b/1", node=NODE, now=1190.0)
    entry = status.volumes[0]
    assert (entry.epoch, entry.node, entry.message) == (
        "node-b/1",
        NODE,
        "restored snapshot 4f1c2a9b taken 3 min ago on node-a",
    )
    assert not entry.HasField("restoring") and entry.restored.bytes_done == 10
    assert seconds(entry.restored.finished_at) == 1190.0 and seconds(entry.restored.started_at) == 1180.0
    restoring = meta.get_condition(status.conditions, v1.CONDITION_RESTORING)
    assert restoring is not None and (restoring.status, restoring.reason) == (v1.FALSE, "Restored")


def test_a_failed_restore_keeps_the_old_copy_named_and_the_next_success_clears_it() -> None:
    status = v1.ProjectStatus(volumes=[state("node-a", "node-a/1", handoff="abc")])
    volumestatus.restore_failed(status, "data", "repository r is unreachable: boom", now=5.0)
    failed = meta.get_condition(status.conditions, v1.CONDITION_RESTORE_FAILED)
    assert failed is not None and (failed.status, failed.message) == (
        v1.TRUE,
        "volume data: repository r is unreachable: boom",
    )
    assert (status.volumes[0].node, status.volumes[0].epoch, status.volumes[0].last_error) == (
        "node-a",
        "node-a/1",
        "repository r is unreachable: boom",
    )
    again = v1.ProjectStatus()
    again.CopyFrom(status)
    volumestatus.restore_failed(again, "data", "repository r is unreachable: boom", now=9.0)
    assert again == status  # a retry failing the same way changes nothing: nothing is written, the backoff holds
    volumestatus.started(status, "data", epoch="node-b/2", node=NODE, message="first run: no snapshot yet", now=6.0)
    failed = meta.get_condition(status.conditions, v1.CONDITION_RESTORE_FAILED)
    assert failed is not None and failed.status == v1.FALSE
    assert not status.volumes[0].last_error and not status.volumes[0].handoff_snapshot
    assert not status.volumes[0].HasField("last_error_time")


def test_backups_record_the_last_one_and_clear_only_their_own_overdue_condition() -> None:
    status = v1.ProjectStatus()
    assert volumestatus.overdue(status, "data", "no backup yet, every 10s", now=1.0)
    assert not volumestatus.overdue(status, "logs", "no backup yet, every 10s", now=2.0)  # one spell at a time
    last = v1.SnapshotRecord(id="x" * 64, size_bytes=3)
    volumestatus.backup_taken(status, "logs", last, [last], requested=None, now=3.0)
    overdue = meta.get_condition(status.conditions, v1.CONDITION_BACKUP_OVERDUE)
    assert overdue is not None and overdue.status == v1.TRUE  # it names data, not logs
    volumestatus.backup_failed(status, "data", "boom", requested=timestamp(2.5), now=3.5)
    data = backups.ensure_volume_status(status, "data")
    assert (data.last_error, seconds(data.backup_request_handled)) == ("boom", 2.5)
    volumestatus.backup_taken(status, "data", None, [last], requested=timestamp(4.0), now=4.0)  # an empty volume
    assert not data.HasField("last_backup") and not data.last_error and list(data.snapshots) == [last]
    overdue = meta.get_condition(status.conditions, v1.CONDITION_BACKUP_OVERDUE)
    assert overdue is not None and (overdue.status, overdue.reason) == (v1.FALSE, "BackupTaken")


def test_ages_for_people_and_volumes_left_behind() -> None:
    assert [format_age(s) for s in (0.5, 42, 180, 5 * 3600, 3 * 86400)] == [
        "just now",
        "42s ago",
        "3 min ago",
        "5 h ago",
        "3 days ago",
    ]
    status = v1.ProjectStatus()
    volumestatus.serving(
        status, "data", epoch="node-b/1", node=NODE, message=volumestatus.left_behind_message("node-a")
    )
    assert status.volumes[0].message == "volume data stays on node-a: no backup configured"
    volumestatus.serving(status, "data", epoch="node-b/1", node=NODE)
    assert status.volumes[0].message == "volume data stays on node-a: no backup configured"  # kept until news


def test_the_status_records_at_most_the_newest_snapshots_within_the_cap() -> None:
    listed = [v1.SnapshotRecord(id=f"{i:064x}") for i in range(volumestatus.MAX_LISTED_SNAPSHOTS + 20)]
    status = v1.ProjectStatus()
    volumestatus.backup_taken(status, "data", listed[0], listed, requested=None, now=1.0)
    [entry] = status.volumes
    assert [s.id for s in entry.snapshots] == [s.id for s in listed[: volumestatus.MAX_LISTED_SNAPSHOTS]]
