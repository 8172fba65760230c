"""What a person wants to know about a project's volume data, read from its spec and status: shared by
`caractrl describe project` and the dashboard's project page, so both say the same.

Guarantees: pure (the time is passed in); `volume_readings` lists every volume the data story concerns — each
Persistent volume or volume with backup settings, in spec order, then any volume status whose volume left the
spec — and never fails on odd input (an unparsable `every` reads as unknown).
"""

from __future__ import annotations

from dataclasses import dataclass

from caravanserai import meta, v1
from caravanserai.clock import seconds
from caravanserai.project import backups
from caravanserai.text.durations import format_duration, parse_duration
from caravanserai.text.quantity import format_bytes

SHORT_ID = 8
"""Digits of a snapshot id shown in tables and messages (restic's short id)."""


def short_id(snapshot_id: str) -> str:
    """The first `SHORT_ID` digits of a snapshot id."""
    return snapshot_id[:SHORT_ID]


def size_text(n: int) -> str:
    """Bytes for people: `1.2MiB`, `512B`."""
    return f"{format_bytes(n)}B"


def took_text(duration: float) -> str:
    """A duration of work (a backup, a restore): `3.2s`, `4m`."""
    return f"{duration:.1f}s" if duration < 120 else format_duration(duration)


def concerned(volume: v1.Volume) -> bool:
    """Whether `volume` has a data story to tell: Persistent, or with backup or restore settings."""
    settings = volume.HasField("backup") or volume.HasField("restore_request") or bool(volume.restore)
    return backups.is_persistent(volume) or settings


def every_seconds(volume: v1.Volume) -> float | None:
    """`backup.every` in seconds (None when unset or unparsable)."""
    try:
        return parse_duration(volume.backup.every) if volume.backup.every else None
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class VolumeReading:
    """One volume's data at a glance. `spec`/`status` are the volume's own messages (None when absent)."""

    name: str
    spec: v1.Volume | None
    status: v1.VolumeStatus | None
    backup_age: float | None  # seconds since the last successful backup (None: none yet)
    every: float | None
    overdue: bool

    @property
    def backed_up(self) -> bool:
        return self.spec is not None and backups.is_backed_up(self.spec)

    @property
    def restoring(self) -> v1.VolumeRestore | None:
        status = self.status
        return status.restoring if status is not None and status.HasField("restoring") else None


def _backup_age(status: v1.VolumeStatus | None, now: float) -> float | None:
    if status is None or not status.last_backup.HasField("time"):
        return None
    return max(0.0, now - seconds(status.last_backup.time))


def _overdue(project: v1.Project, age: float | None, every: float | None) -> bool:
    """The BackupOverdue condition holds and this volume's last backup (or its absence) is what it is about."""
    condition = meta.get_condition(project.status.conditions, v1.CONDITION_BACKUP_OVERDUE)
    if condition is None or condition.status != v1.TRUE:
        return False
    return age is None or every is None or age > every


def volume_readings(project: v1.Project, now: float) -> list[VolumeReading]:
    """The readings of every volume `concerned` by data, then of volume statuses without a spec volume."""
    readings = []
    declared = set()
    for volume in project.spec.volumes:
        declared.add(volume.name)
        status = backups.volume_status(project.status, volume.name)
        if not concerned(volume) and status is None:
            continue
        age, every = _backup_age(status, now), every_seconds(volume)
        overdue = backups.is_backed_up(volume) and _overdue(project, age, every)
        readings.append(VolumeReading(volume.name, volume, status, age, every, overdue))
    for status in project.status.volumes:
        if status.name not in declared:
            readings.append(VolumeReading(status.name, None, status, _backup_age(status, now), None, False))
    return readings


def freshness(reading: VolumeReading) -> str:
    """`last backup 2m ago (every 5m)`, `no backup yet (every 5m)`, with ` OVERDUE` when it is; "" for a volume
    without backup."""
    if not reading.backed_up:
        return ""
    assert reading.spec is not None  # backed_up implies a spec volume
    every = f"every {reading.spec.backup.every}"
    text = "no backup yet" if reading.backup_age is None else f"last backup {format_duration(reading.backup_age)} ago"
    return f"{text} ({every})" + (" OVERDUE" if reading.overdue else "")


def restoring_text(restore: v1.VolumeRestore) -> str:
    """`restoring 4f1c2a9b: 512MiB / 1GiB`."""
    done, total = size_text(restore.bytes_done), size_text(restore.bytes_total)
    return f"restoring {short_id(restore.snapshot.id) or '?'}: {done} / {total}"


__all__ = [
    "SHORT_ID",
    "VolumeReading",
    "concerned",
    "every_seconds",
    "freshness",
    "restoring_text",
    "short_id",
    "size_text",
    "took_text",
    "volume_readings",
]
