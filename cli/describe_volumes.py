"""The data part of `caractrl describe project NAME`: a Volumes section (per volume: type, backup settings, last
backup age against `every` with OVERDUE, last error, restore in progress, what the copy came from, hand-off,
requests and recorded snapshots), the Move line while `status.move` is set, and the Placement section (the
scheduler's estimates for the chosen node and the runner-up).

Guarantees: pure text from the project and `now`; every field of `Volume`'s backup settings, `VolumeStatus`,
`ProjectMove` and `PlacementEstimates` is shown when set (`tests/unit/cli/test_cli_printers.py` clears each field
and checks the description changes); at most `SNAPSHOT_ROWS` snapshots per volume, then a pointer to
`caractrl get snapshots`.
"""

from __future__ import annotations

from caravanserai import v1
from caravanserai.cli.layout import INDENT, Writer
from caravanserai.cli.printers import NONE, age, when
from caravanserai.client.volumestatus import (
    VolumeReading,
    freshness,
    restoring_text,
    short_id,
    size_text,
    took_text,
    volume_readings,
)
from caravanserai.clock import rfc3339

SNAPSHOT_ROWS = 5
SNAPSHOT_HEADERS = ("ID", "TIME", "NODE", "SIZE", "ADDED", "DURATION", "COPY")
PLACEMENT_HEADERS = (
    "ESTIMATE", "NODE", "START DELAY", "IMAGES", "RESTORE", "DOWNLOAD", "FROM", "RPO", "UPLOAD", "RPO FEASIBLE", "SCORE"
)  # fmt: skip


def snapshot_text(record: v1.SnapshotRecord, now: float) -> str:
    """`4f1c2a9b taken 3m ago on node-a: 1GiB (12MiB added in 3.2s), copy node-a/1a2b3c4d`."""
    taken = f"taken {age(record.time, now)} ago" if record.HasField("time") else "taken at an unknown time"
    text = f"{short_id(record.id) or '?'} {taken} on {record.node or '?'}: {size_text(record.size_bytes)}"
    text += f" ({size_text(record.bytes_added)} added in {took_text(record.duration_seconds)})"
    return text + (f", copy {record.epoch}" if record.epoch else "")


def _who_when(restore: v1.VolumeRestore, now: float) -> str:
    finished = f", finished {age(restore.finished_at, now)} ago" if restore.HasField("finished_at") else ""
    return f"by {restore.node or '?'}, started {age(restore.started_at, now)} ago{finished}"


def restore_text(restore: v1.VolumeRestore, now: float) -> str:
    """A finished restore, on two lines: `1GiB / 1GiB by node-b, started 5m ago, finished 4m ago` and `snapshot
    4f1c2a9b taken …` (the snapshot restored)."""
    progress = f"{size_text(restore.bytes_done)} / {size_text(restore.bytes_total)}"
    return f"{progress} {_who_when(restore, now)}\nsnapshot {snapshot_text(restore.snapshot, now)}"


def restoring_lines(restore: v1.VolumeRestore, now: float) -> str:
    """A restore in progress: `restoring 4f1c2a9b: 512MiB / 1GiB by node-b, started 5s ago` and the snapshot."""
    return f"{restoring_text(restore)} {_who_when(restore, now)}\nsnapshot {snapshot_text(restore.snapshot, now)}"


def _keep(keep: v1.BackupRetention) -> str:
    pairs = [(n, getattr(keep, n)) for n in ("last", "hourly", "daily", "weekly", "monthly")]
    return " ".join(f"{name}={value}" for name, value in pairs if value) or NONE


def _settings(volume: v1.Volume) -> list[tuple[str, str]]:
    """Type, backup settings and restore policy of a spec volume."""
    backup = volume.backup
    pairs = [("Type", volume.type or "Ephemeral")]
    if volume.HasField("backup"):
        pairs.append(("Backup", f"repository {backup.repository or NONE}, every {backup.every or NONE}"))
        pairs.append(("Keep", _keep(backup.keep)))
        if backup.HasField("before"):
            hook = backup.before
            command = " ".join(hook.command) or NONE
            pairs.append(("Before", f"{command} in service {hook.service or NONE} (timeout {hook.timeout or '60s'})"))
        pairs.append(("Restore", volume.restore or "Latest (default)"))
    else:
        pairs.append(("Backup", "<none>: the data stays on its node when the project moves"))
        if volume.restore:
            pairs.append(("Restore", volume.restore))
    return pairs


def _requests(volume: v1.Volume | None, status: v1.VolumeStatus | None, now: float) -> list[tuple[str, str]]:
    """`caractrl backup`/`restore` requests and when the node handled them."""
    pairs = []
    if volume is not None and volume.backup.HasField("requested_at"):
        pairs.append(("Backup Requested", when(volume.backup.requested_at, now)))
    if status is not None and status.HasField("backup_request_handled"):
        pairs.append(("Backup Handled", when(status.backup_request_handled, now)))
    if volume is not None and volume.HasField("restore_request"):
        request = volume.restore_request
        pairs.append(("Restore Requested", f"snapshot {request.snapshot or NONE}, {when(request.requested_at, now)}"))
    if status is not None and status.HasField("restore_request_handled"):
        pairs.append(("Restore Handled", when(status.restore_request_handled, now)))
    return pairs


def _data(status: v1.VolumeStatus, now: float, *, backed_up: bool) -> list[tuple[str, str]]:
    """What the node observed of the data: last backup and error, the copy, restores, hand-off."""
    pairs = []
    if status.HasField("last_backup"):
        pairs.append(("Last Snapshot", snapshot_text(status.last_backup, now)))
    if status.last_error or status.HasField("last_error_time"):
        pairs.append(("Last Error", f"{status.last_error or NONE} ({age(status.last_error_time, now)} ago)"))
    elif backed_up:
        pairs.append(("Last Error", NONE))
    pairs.append(("Data", status.message or NONE))
    if status.epoch or status.node:
        pairs.append(("Copy", f"{status.epoch or NONE} on {status.node or NONE}"))
    if status.HasField("restoring"):
        pairs.append(("Restoring", restoring_lines(status.restoring, now)))
    if status.HasField("restored"):
        pairs.append(("Restored", restore_text(status.restored, now)))
    if status.handoff_snapshot:
        pairs.append(("Handoff Snapshot", f"{status.handoff_snapshot} (the next node restores exactly this one)"))
    return pairs


def _snapshots(out: Writer, project: str, status: v1.VolumeStatus, now: float) -> None:
    out.heading("Snapshots", 2, f"{len(status.snapshots)}" if status.snapshots else "")
    rows = [
        [
            short_id(s.id) or NONE,
            age(s.time, now),
            s.node or NONE,
            size_text(s.size_bytes),
            size_text(s.bytes_added),
            took_text(s.duration_seconds),
            s.epoch or NONE,
        ]
        for s in status.snapshots[:SNAPSHOT_ROWS]
    ]
    out.table(SNAPSHOT_HEADERS, rows, 3)
    if len(status.snapshots) > SNAPSHOT_ROWS:
        more = len(status.snapshots) - SNAPSHOT_ROWS
        out.lines.append(f"{INDENT * 3}… and {more} more: caractrl get snapshots {project}")


def _volume(out: Writer, project: v1.Project, reading: VolumeReading, now: float) -> None:
    title = reading.name if reading.spec is not None else f"{reading.name} (no longer in the spec)"
    out.heading(title or NONE, 1, freshness(reading))
    pairs = _settings(reading.spec) if reading.spec is not None else []
    if reading.status is not None:
        pairs += _data(reading.status, now, backed_up=reading.backed_up)
    pairs += _requests(reading.spec, reading.status, now)
    out.fields(pairs, 2)
    if reading.status is not None and (reading.backed_up or reading.status.snapshots):
        _snapshots(out, project.metadata.name, reading.status, now)


def write_volumes(out: Writer, project: v1.Project, now: float) -> None:
    """The Volumes section (nothing when no volume is Persistent or has backup settings or a status)."""
    readings = volume_readings(project, now)
    if not readings:
        return
    out.heading("Volumes")
    for reading in readings:
        _volume(out, project, reading, now)


def move_text(move: v1.ProjectMove, now: float) -> str:
    """The Move line: `NodeDrained off node-a, asked 10s ago: …; final backups until … (in 4m)`."""
    deadline = rfc3339(move.deadline) if move.HasField("deadline") else NONE
    asked = f"asked {age(move.requested_at, now)} ago" if move.HasField("requested_at") else "asked <unknown>"
    return (
        f"{move.reason or NONE} off node {move.node or NONE}, {asked}: {move.message or NONE}; the node stops the "
        f"services and takes the final backups, at most until {deadline}"
    )


def _estimate_row(role: str, e: v1.NodeEstimate) -> list[str]:
    return [
        role,
        e.node or NONE,
        took_text(e.start_delay_seconds),
        size_text(e.image_bytes),
        size_text(e.restore_bytes),
        f"{size_text(int(e.download_rate))}/s",
        e.download_rate_source or NONE,
        size_text(e.rpo_bytes),
        f"{size_text(int(e.upload_rate))}/s",
        "yes" if e.rpo_feasible else "no",
        f"{e.score:g}",
    ]


def write_placement(out: Writer, placement: v1.PlacementEstimates) -> None:
    """The Placement section: the scheduler's estimates for the chosen node and the runner-up."""
    out.heading("Placement")
    rows = []
    if placement.HasField("chosen"):
        rows.append(_estimate_row("chosen", placement.chosen))
    if placement.HasField("runner_up"):
        rows.append(_estimate_row("runner-up", placement.runner_up))
    out.table(PLACEMENT_HEADERS, rows)


__all__ = [
    "PLACEMENT_HEADERS",
    "SNAPSHOT_HEADERS",
    "SNAPSHOT_ROWS",
    "move_text",
    "restore_text",
    "restoring_lines",
    "snapshot_text",
    "write_placement",
    "write_volumes",
]
