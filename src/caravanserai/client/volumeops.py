"""Backups and restores a client asks for (`caractrl backup`, `caractrl restore`), and the readings of a project's
volume status that tell when the node handled them.

* `request_backup` stamps `spec.volumes[v].backup.requestedAt` on every backed-up volume (or the one named) in
  one read-modify-write (`client.apply.modify`); `request_restore` stamps `spec.volumes[v].restoreRequest`
  {snapshot: the full id, requestedAt}. Both raise ValueError, one line naming the volume or snapshot, before
  anything is written when the volume is unknown or not backed up, or the snapshot id is unknown, ambiguous or
  not an id. NotFound when the project does not exist.
* `match_snapshot` is the one matching of a snapshot id typed by a person: the full id, or a prefix of at least
  `MIN_PREFIX` hex digits that only one of the volume's recorded snapshots starts with.
* `backup_outcome` / `restore_outcome` read whether the node handled a stamp (`backupRequestHandled` /
  `restoreRequestHandled` at or after it) and how: the snapshot taken or restored, or the error recorded.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from caravanserai import v1
from caravanserai.client.apply import modify
from caravanserai.client.client import Client
from caravanserai.client.volumestatus import short_id
from caravanserai.clock import timestamp
from caravanserai.project import backups

MIN_PREFIX = 8
"""The shortest prefix of a snapshot id `match_snapshot` accepts."""


def _volume(project: v1.Project, name: str) -> v1.Volume:
    """The spec volume `name` of `project`; ValueError naming it (and the volumes there are) when absent."""
    for volume in project.spec.volumes:
        if volume.name == name:
            return volume
    declared = ", ".join(v.name for v in project.spec.volumes) or "none"
    raise ValueError(f"project {project.metadata.name} has no volume {name} (it has {declared})")


def _backed_up(project: v1.Project, name: str) -> v1.Volume:
    """The backed-up spec volume `name`; ValueError naming it when it is unknown or has no backup."""
    volume = _volume(project, name)
    if not backups.is_backed_up(volume):
        kind = volume.type or v1.VOLUME_EPHEMERAL
        raise ValueError(
            f"volume {name} of project {project.metadata.name} has no backup ({kind}, no backup.repository)"
        )
    return volume


def backup_targets(project: v1.Project, volume: str = "") -> list[str]:
    """The volumes a backup request stamps: `volume` (which must be backed up) or every backed-up one; ValueError
    when there is none."""
    if volume:
        return [_backed_up(project, volume).name]
    names = [v.name for v in backups.backed_up(project.spec)]
    if not names:
        raise ValueError(f"project {project.metadata.name} has no volume with a backup (spec.volumes[].backup)")
    return names


async def request_backup(client: Client, name: str, volume: str = "", *, now: float) -> tuple[v1.Project, list[str]]:
    """Stamp `backup.requestedAt = now` on the volumes `backup_targets` names, in one write; the stored project
    and the volumes stamped."""
    stamped: list[str] = []

    def mutate(project: v1.Project) -> bool:
        stamped[:] = backup_targets(project, volume)
        for target in stamped:
            _volume(project, target).backup.requested_at.CopyFrom(timestamp(now))
        return True

    stored, _ = await modify(client.projects, name, mutate)
    return stored, stamped


def match_snapshot(snapshots: Sequence[v1.SnapshotRecord], wanted: str, *, volume: str) -> v1.SnapshotRecord:
    """The snapshot whose id is `wanted`, or the only one starting with it (`MIN_PREFIX` hex digits at least);
    ValueError naming `wanted` (and `volume`) otherwise."""
    text = wanted.strip().lower()
    if len(text) < MIN_PREFIX or any(c not in string.hexdigits for c in text):
        raise ValueError(f"snapshot {wanted!r}: give a snapshot id or at least {MIN_PREFIX} of its hex digits")
    found = [s for s in snapshots if s.id.lower().startswith(text)]
    if not found:
        raise ValueError(f"volume {volume} has no snapshot {wanted} (see caractrl get snapshots)")
    if len(found) > 1:
        ids = ", ".join(short_id(s.id) for s in found)
        raise ValueError(f"snapshot {wanted} of volume {volume} is ambiguous ({ids}): give more digits")
    return found[0]


def known_snapshots(project: v1.Project, volume: str) -> Sequence[v1.SnapshotRecord]:
    """The snapshots recorded for `volume` (newest first; none when no status was recorded yet)."""
    status = backups.volume_status(project.status, volume)
    return status.snapshots if status is not None else ()


async def request_restore(
    client: Client, name: str, volume: str, snapshot: str, *, now: float
) -> tuple[v1.Project, v1.SnapshotRecord]:
    """Stamp `restoreRequest {snapshot: the matched full id, requestedAt: now}` on backed-up `volume`, in one
    write; the stored project and the snapshot matched."""
    matched: list[v1.SnapshotRecord] = []

    def mutate(project: v1.Project) -> bool:
        target = _backed_up(project, volume)
        record = match_snapshot(known_snapshots(project, volume), snapshot, volume=volume)
        matched[:] = [record]
        target.restore_request.snapshot = record.id
        target.restore_request.requested_at.CopyFrom(timestamp(now))
        return True

    stored, _ = await modify(client.projects, name, mutate)
    return stored, matched[0]


def _at_or_after(ts: Timestamp, stamp: Timestamp) -> bool:
    return (ts.seconds, ts.nanos) >= (stamp.seconds, stamp.nanos) and bool(ts.seconds or ts.nanos)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a node handled a request on one volume: `snapshot` taken or restored, else `error`."""

    volume: str
    snapshot: v1.SnapshotRecord | None = None
    error: str = ""


def backup_outcome(project: v1.Project, volume: str, stamp: Timestamp) -> Outcome | None:
    """None until `backupRequestHandled` of `volume` reaches `stamp`; then its last backup, or its last error."""
    status = backups.volume_status(project.status, volume)
    if status is None or not _at_or_after(status.backup_request_handled, stamp):
        return None
    if status.last_error:
        return Outcome(volume, error=status.last_error)
    return Outcome(volume, snapshot=status.last_backup)


def restore_outcome(project: v1.Project, volume: str, stamp: Timestamp, snapshot: str) -> Outcome | None:
    """None until `restoreRequestHandled` of `volume` reaches `stamp`; then the restore of `snapshot`, or the
    error recorded (or why the copy is not that snapshot)."""
    status = backups.volume_status(project.status, volume)
    if status is None or not _at_or_after(status.restore_request_handled, stamp):
        return None
    if status.restored.snapshot.id == snapshot and not status.last_error:
        return Outcome(volume, snapshot=status.restored.snapshot)
    error = status.last_error or f"the volume's copy is not from snapshot {short_id(snapshot)}"
    return Outcome(volume, error=error)


__all__ = [
    "MIN_PREFIX",
    "Outcome",
    "backup_outcome",
    "backup_targets",
    "known_snapshots",
    "match_snapshot",
    "request_backup",
    "request_restore",
    "restore_outcome",
]
