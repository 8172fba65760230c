"""What to do with one backed-up volume before the services that mount it start (pure).

    if needs_listing(volume, status, local, node):
        listed = await restic.snapshots(...)
    plan = decide(volume, status, local, node, listed, url=repository.url)

The choice, in order:

1. A `caractrl restore` request newer than the last one handled: restore exactly that snapshot (a full id or a
   unique prefix among the volume's snapshots). When it names none, the request is answered with that error and
   the choice goes on as if there was none (the current copy is never touched for an unknown snapshot).
2. The local copy is current (`epochs.is_current`): keep it.
3. A move handed a snapshot over (`handoffSnapshot`): restore exactly that one; gone from the repository: fail.
4. `restore: Latest` (the default) and the volume has snapshots: restore the newest.
5. Otherwise start without a restore ("first run: no snapshot yet", or "started empty: restore is Never"):
   adopt a local volume the status says nothing about (`epochs.adoptable`: data no node is known to hold is
   never wiped), else make a fresh empty one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from caravanserai import v1
from caravanserai.agent.docker.records import VolumeInfo
from caravanserai.agent.volumes import epochs
from caravanserai.agent.volumes.resticerrors import not_found
from caravanserai.agent.volumes.resticjson import Snapshot
from caravanserai.agent.volumes.snapshots import find
from caravanserai.agent.volumes.volumestatus import FIRST_RUN, STARTED_EMPTY
from caravanserai.clock import seconds

KEEP = "keep"
ADOPT = "adopt"
RESTORE = "restore"
EMPTY = "empty"
FAIL = "fail"


@dataclass(frozen=True, slots=True)
class Plan:
    """One volume's next step: `action`, the snapshot to restore, the message (start without restore, or why it
    fails), and the restore request it answers with the error it answers it with ("" when it is honoured)."""

    action: str
    snapshot: Snapshot | None = None
    message: str = ""
    request: Timestamp | None = None
    request_error: str = ""


def requested(volume: v1.Volume, status: v1.VolumeStatus | None) -> Timestamp | None:
    """The time stamp of a restore request not handled yet (None when there is none)."""
    request = volume.restore_request
    if not request.snapshot or not request.HasField("requested_at"):
        return None
    handled = seconds(status.restore_request_handled) if status is not None else 0.0
    return request.requested_at if seconds(request.requested_at) > handled else None


def needs_listing(volume: v1.Volume, status: v1.VolumeStatus | None, local: VolumeInfo | None, node: str) -> bool:
    """Whether `decide` needs the volume's snapshots (else it decides without asking the repository)."""
    if requested(volume, status) is not None:
        return True
    if epochs.is_current(local, status, node):
        return False
    return bool(status is not None and status.handoff_snapshot) or volume.restore != v1.RESTORE_NEVER


def decide(
    volume: v1.Volume,
    status: v1.VolumeStatus | None,
    local: VolumeInfo | None,
    node: str,
    listed: Sequence[Snapshot],
    *,
    url: str,
) -> Plan:
    """The plan for `volume` (see the module docstring); `listed`: its snapshots newest first (may be empty when
    `needs_listing` said no)."""
    request = requested(volume, status)
    if request is None:
        return _copy(volume, status, local, node, listed, url=url)
    wanted = find(listed, volume.restore_request.snapshot)
    if wanted is not None:
        return Plan(RESTORE, wanted, request=request)
    error = not_found(volume.restore_request.snapshot, url).message
    return dataclasses.replace(
        _copy(volume, status, local, node, listed, url=url), request=request, request_error=error
    )


def _copy(
    volume: v1.Volume,
    status: v1.VolumeStatus | None,
    local: VolumeInfo | None,
    node: str,
    listed: Sequence[Snapshot],
    *,
    url: str,
) -> Plan:
    if epochs.is_current(local, status, node):
        return Plan(KEEP)
    handoff = status.handoff_snapshot if status is not None else ""
    if handoff:
        found = find(listed, handoff)
        return Plan(RESTORE, found) if found is not None else Plan(FAIL, message=not_found(handoff, url).message)
    if volume.restore != v1.RESTORE_NEVER and listed:
        return Plan(RESTORE, listed[0])
    message = STARTED_EMPTY if volume.restore == v1.RESTORE_NEVER else FIRST_RUN
    return Plan(ADOPT if epochs.adoptable(local, status) else EMPTY, message=message)


__all__ = ["ADOPT", "EMPTY", "FAIL", "KEEP", "Plan", "RESTORE", "decide", "needs_listing", "requested"]
