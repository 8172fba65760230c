"""When a volume's next backup is due, when it is overdue, and what is said about it (pure).

Guarantees:

* **Due** `every` after the start of the last successful run the caller remembers (so a run that takes longer
  than `every` is followed at once by the next: back to back, never overlapping), else `every` after the last
  successful backup (`lastBackup.time`), else `every` after the copy was made; at once when
  `backup.requestedAt` is newer than `backupRequestHandled` (and newer than a request already answered).
* **Overdue** once `every + margin` has passed since the last successful backup (`lastBackup.time`, or a later
  one the caller remembers; else the copy's creation), with margin = max(every / 2, 10s).
* `every` is the volume's `backup.every` (the apiserver refuses a missing or invalid one; read here as
  `DEFAULT_EVERY` when empty, and a `ValueError` naming the field when unreadable).
"""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp

from caravanserai import v1
from caravanserai.clock import seconds
from caravanserai.text.durations import format_age, parse_duration

DEFAULT_EVERY = 3600.0
MIN_MARGIN = 10.0


def every_of(volume: v1.Volume) -> float:
    """Seconds between backups of `volume`."""
    text = volume.backup.every
    if not text:
        return DEFAULT_EVERY
    try:
        value = parse_duration(text)
    except ValueError as exc:
        raise ValueError(f"spec.volumes[{volume.name}].backup.every: {exc}") from None
    if value <= 0:
        raise ValueError(f"spec.volumes[{volume.name}].backup.every: must be more than 0")
    return value


def margin(every: float) -> float:
    """How long after being due a backup counts as overdue."""
    return max(every / 2, MIN_MARGIN)


def last_success(status: v1.VolumeStatus | None, *, succeeded: float, since: float) -> float:
    """When the volume's last successful backup was taken (`succeeded`: one the caller knows of and the status
    may not show yet; else when its copy was made, `since`)."""
    recorded = seconds(status.last_backup.time) if status is not None and status.HasField("last_backup") else 0.0
    return max(recorded, succeeded) or since


def due_at(status: v1.VolumeStatus | None, every: float, *, started: float, since: float) -> float:
    """When the next periodic backup is due (`started`: when the caller's last successful run began, 0: none)."""
    return (started or last_success(status, succeeded=0.0, since=since)) + every


def overdue_at(status: v1.VolumeStatus | None, every: float, *, succeeded: float, since: float) -> float:
    """From when on the volume's backups are overdue."""
    return last_success(status, succeeded=succeeded, since=since) + every + margin(every)


def requested(volume: v1.Volume, status: v1.VolumeStatus | None, *, answered: float = 0.0) -> Timestamp | None:
    """The `caractrl backup` request not answered yet (None: none)."""
    backup = volume.backup
    if not backup.HasField("requested_at"):
        return None
    handled = seconds(status.backup_request_handled) if status is not None else 0.0
    return backup.requested_at if seconds(backup.requested_at) > max(handled, answered) else None


def overdue_message(status: v1.VolumeStatus | None, every: float, *, now: float) -> str:
    """Why a volume's backups are overdue, e.g. "last backup 45s ago, every 10s"."""
    if status is None or not status.HasField("last_backup"):
        return f"no backup yet, every {_seconds(every)}"
    return f"last backup {format_age(now - seconds(status.last_backup.time))}, every {_seconds(every)}"


def slow_message(volume: str, took: float, every: float) -> str:
    """ "a backup of data takes 12s, longer than every (10s); backups run back to back"."""
    return (
        f"a backup of {volume} takes {_seconds(took)}, longer than every ({_seconds(every)}); backups run back to back"
    )


def _seconds(value: float) -> str:
    return f"{value:.0f}s" if value < 120 else f"{value / 60:.0f}m"


__all__ = [
    "DEFAULT_EVERY",
    "MIN_MARGIN",
    "due_at",
    "every_of",
    "last_success",
    "margin",
    "overdue_at",
    "overdue_message",
    "requested",
    "slow_message",
]
