"""What the agent records of a volume's data in the project's status: backups, restores, the current copy, and
the project conditions Restoring, RestoreFailed and BackupOverdue.

Every function changes the `v1.ProjectStatus` it is given (a copy owned by the caller) and nothing else; `now` is
passed in. Guarantees:

* **One current copy.** `epoch` and `node` are written only with a complete copy (`restored`, `started`); a
  restore in progress is `restoring`, and a failed one leaves epoch and node as they were.
* **A restore's record**: `restoring` (snapshot, bytes done/total, start) while it runs, then `restored` (with its
  end) and the message "restored snapshot 4f1c2a9b taken 3 min ago on node-a"; a hand-off snapshot is cleared
  once used.
* **Conditions name their volume.** Restoring, RestoreFailed and BackupOverdue messages start with
  "volume <name>: "; the success that ends one (a restore, a backup) clears it only when it names that volume.
* **Errors**: a failed backup or restore sets `last_error` (one line) and its time (kept while the same error
  repeats, so retries write nothing new); the next success clears both.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from google.protobuf.timestamp_pb2 import Timestamp

from caravanserai import meta, v1
from caravanserai.agent.volumes.snapshots import short
from caravanserai.clock import seconds, timestamp
from caravanserai.project.backups import ensure_volume_status
from caravanserai.text.durations import format_age

MAX_LISTED_SNAPSHOTS = 100  # the newest ones recorded in status (within the API's limit on repeated fields)
FIRST_RUN = "first run: no snapshot yet"
STARTED_EMPTY = "started empty: restore is Never"
REASON_RESTORING = "Restoring"
REASON_RESTORED = "Restored"
REASON_RESTORE_FAILED = "RestoreFailed"
REASON_BACKUP_OVERDUE = "BackupOverdue"
REASON_BACKUP_TAKEN = "BackupTaken"


def describe_snapshot(record: v1.SnapshotRecord, *, now: float) -> str:
    """ "snapshot 4f1c2a9b taken 3 min ago on node-a"."""
    where = f" on {record.node}" if record.node else ""
    return f"snapshot {short(record.id)} taken {format_age(now - seconds(record.time))}{where}"


def left_behind_message(node: str) -> str:
    """What describe says of a Persistent volume without backup whose data stayed on `node`."""
    return f"volume data stays on {node}: no backup configured"


def _prefix(volume: str) -> str:
    return f"volume {volume}: "


def _clear(status: v1.ProjectStatus, condition: str, volume: str, reason: str, *, now: float) -> None:
    """Set `condition` False (with `reason`) when it is True for `volume`."""
    found = meta.get_condition(status.conditions, condition)
    if found is not None and found.status == v1.TRUE and found.message.startswith(_prefix(volume)):
        meta.set_condition(status.conditions, condition, v1.FALSE, reason=reason, message=found.message, now=now)


def begin_restore(
    status: v1.ProjectStatus, volume: str, snapshot: v1.SnapshotRecord, *, total: int, node: str, now: float
) -> None:
    """A restore of `snapshot` (`total` bytes) into `volume` starts on `node`: `restoring`, Restoring=True."""
    entry = ensure_volume_status(status, volume)
    entry.restoring.Clear()
    entry.restoring.snapshot.CopyFrom(snapshot)
    entry.restoring.bytes_total = total
    entry.restoring.started_at.CopyFrom(timestamp(now))
    entry.restoring.node = node
    message = _prefix(volume) + "restoring " + describe_snapshot(snapshot, now=now)
    meta.set_condition(
        status.conditions, v1.CONDITION_RESTORING, v1.TRUE, reason=REASON_RESTORING, message=message, now=now
    )


def restore_progress(status: v1.ProjectStatus, volume: str, done: int) -> None:
    """Bytes written so far by the restore in progress (nothing when none is)."""
    entry = ensure_volume_status(status, volume)
    if entry.HasField("restoring"):
        entry.restoring.bytes_done = done


def restored(status: v1.ProjectStatus, volume: str, *, epoch: str, node: str, now: float) -> None:
    """The restore in progress finished: its record becomes `restored`, the copy `epoch` on `node` is current."""
    entry = ensure_volume_status(status, volume)
    record = entry.restoring.snapshot
    entry.restored.CopyFrom(entry.restoring)
    entry.restored.finished_at.CopyFrom(timestamp(now))
    entry.restored.bytes_done = entry.restored.bytes_total
    entry.ClearField("restoring")
    entry.message = "restored " + describe_snapshot(record, now=now)
    _current(status, entry, epoch=epoch, node=node, now=now)
    meta.set_condition(
        status.conditions,
        v1.CONDITION_RESTORING,
        v1.FALSE,
        reason=REASON_RESTORED,
        message=_prefix(volume) + entry.message,
        now=now,
    )


def started(status: v1.ProjectStatus, volume: str, *, epoch: str, node: str, message: str, now: float) -> None:
    """The copy `epoch` on `node` is current without a restore (made empty, or an existing one adopted)."""
    entry = ensure_volume_status(status, volume)
    entry.ClearField("restoring")
    entry.ClearField("restored")
    entry.message = message
    _current(status, entry, epoch=epoch, node=node, now=now)
    _clear(status, v1.CONDITION_RESTORING, volume, REASON_RESTORED, now=now)


def _current(status: v1.ProjectStatus, entry: v1.VolumeStatus, *, epoch: str, node: str, now: float) -> None:
    entry.epoch = epoch
    entry.node = node
    entry.handoff_snapshot = ""
    entry.last_error = ""
    entry.ClearField("last_error_time")
    _clear(status, v1.CONDITION_RESTORE_FAILED, entry.name, REASON_RESTORED, now=now)


def restore_failed(status: v1.ProjectStatus, volume: str, error: str, *, now: float) -> None:
    """A restore into `volume` failed with `error`: RestoreFailed=True; epoch and node stay as they were."""
    entry = ensure_volume_status(status, volume)
    entry.ClearField("restoring")
    _error(entry, error, now=now)
    message = _prefix(volume) + error
    meta.set_condition(
        status.conditions, v1.CONDITION_RESTORE_FAILED, v1.TRUE, reason=REASON_RESTORE_FAILED, message=message, now=now
    )
    _clear(status, v1.CONDITION_RESTORING, volume, REASON_RESTORE_FAILED, now=now)


def _error(entry: v1.VolumeStatus, error: str, *, now: float) -> None:
    """Record `error`; the same error again keeps its first time, so a failure repeated by a retry changes
    nothing (and writes nothing, wakes nothing: the retry's backoff holds)."""
    if entry.last_error != error or not entry.HasField("last_error_time"):
        entry.last_error = error
        entry.last_error_time.CopyFrom(timestamp(now))


def restore_request_handled(
    status: v1.ProjectStatus, volume: str, requested_at: Timestamp, error: str = "", *, now: float
) -> None:
    """A `caractrl restore` request (stamped `requested_at`) was handled; `error` when it could not be."""
    entry = ensure_volume_status(status, volume)
    entry.restore_request_handled.CopyFrom(requested_at)
    if error:
        _error(entry, error, now=now)


def backup_taken(
    status: v1.ProjectStatus,
    volume: str,
    last: v1.SnapshotRecord | None,
    listed: Iterable[v1.SnapshotRecord],
    *,
    requested: Timestamp | None,
    now: float,
) -> None:
    """A backup of `volume` succeeded: last backup (None: the volume was empty, nothing saved), the snapshots
    listed after it, the error and an overdue condition naming the volume cleared, the request it answered (if
    any) handled."""
    entry = ensure_volume_status(status, volume)
    if last is not None:
        entry.last_backup.CopyFrom(last)
    del entry.snapshots[:]
    entry.snapshots.extend(itertools.islice(listed, MAX_LISTED_SNAPSHOTS))
    entry.last_error = ""
    entry.ClearField("last_error_time")
    if requested is not None:
        entry.backup_request_handled.CopyFrom(requested)
    _clear(status, v1.CONDITION_BACKUP_OVERDUE, volume, REASON_BACKUP_TAKEN, now=now)


def backup_failed(
    status: v1.ProjectStatus, volume: str, error: str, *, requested: Timestamp | None, now: float
) -> None:
    """A backup of `volume` failed with `error` (the request it answered, if any, handled all the same)."""
    entry = ensure_volume_status(status, volume)
    _error(entry, error, now=now)
    if requested is not None:
        entry.backup_request_handled.CopyFrom(requested)


def overdue(status: v1.ProjectStatus, volume: str, message: str, *, now: float) -> bool:
    """BackupOverdue=True for `volume`; whether it was not True already (a new overdue spell)."""
    found = meta.get_condition(status.conditions, v1.CONDITION_BACKUP_OVERDUE)
    fresh = found is None or found.status != v1.TRUE
    if fresh:
        meta.set_condition(
            status.conditions,
            v1.CONDITION_BACKUP_OVERDUE,
            v1.TRUE,
            reason=REASON_BACKUP_OVERDUE,
            message=_prefix(volume) + message,
            now=now,
        )
    return fresh


def serving(status: v1.ProjectStatus, volume: str, *, epoch: str, node: str, message: str = "") -> None:
    """A Persistent volume without backup is served by `node` (copy `epoch`); `message` when there is news (its
    data stayed on another node)."""
    entry = ensure_volume_status(status, volume)
    entry.epoch = epoch
    entry.node = node
    if message:
        entry.message = message


__all__ = [
    "FIRST_RUN",
    "REASON_BACKUP_OVERDUE",
    "REASON_BACKUP_TAKEN",
    "REASON_RESTORED",
    "REASON_RESTORE_FAILED",
    "REASON_RESTORING",
    "STARTED_EMPTY",
    "backup_failed",
    "backup_taken",
    "begin_restore",
    "describe_snapshot",
    "left_behind_message",
    "overdue",
    "restore_failed",
    "restore_progress",
    "restore_request_handled",
    "restored",
    "serving",
    "started",
]
