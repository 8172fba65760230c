"""A move's final backups: the snapshots a node hands over when its project moves away.

    handoff = await final.take(project)     # after the services were stopped
    lifecycle.finish_move(project, handoff=handoff.snapshots, ...)

Guarantees:

* **Only current copies are handed over.** Each backed-up volume whose current copy is on this node is backed
  up once more (its `before` hook skipped when the service is stopped, as it is during a move), under the
  volume's lock, so no periodic backup overlaps it; the snapshot is recorded as the volume's last backup (status
  and Event BackupTaken) and returned by volume name. A volume whose copy is not here (never restored, say)
  hands nothing over: the next node uses the newest snapshot. Nor does an empty volume (restic saves no empty
  snapshot), so the next node then also starts from the newest snapshot, if there is one.
* **Failures are returned, not raised** (one line per volume: "volume data: <restic's reason>"), with the
  volumes that did succeed, so the caller decides between retrying and moving on past the deadline.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.agent.volumes import epochs, volumestatus
from caravanserai.agent.volumes.backup import BackupJob, BackupTaker
from caravanserai.agent.volumes.resticerrors import ResticError
from caravanserai.agent.volumes.shared import VolumeLocks, write_status
from caravanserai.agent.volumes.snapshots import short
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import NORMAL, EventRecorder
from caravanserai.project import backups

REASON_BACKUP_TAKEN = "BackupTaken"


@dataclass(frozen=True, slots=True)
class Handoff:
    """The final snapshots by volume name, and one line per volume whose final backup failed."""

    snapshots: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class FinalBackups:
    """Takes a moving project's final backups on `node` (see the module docstring)."""

    def __init__(
        self,
        *,
        taker: BackupTaker,
        docker: DockerRuntime,
        client: Client,
        locks: VolumeLocks,
        clock: Clock,
        node: str,
        recorder: EventRecorder | None = None,
    ) -> None:
        self._taker, self._docker, self._client, self._locks = taker, docker, client, locks
        self._clock, self._node, self._recorder = clock, node, recorder

    async def take(self, project: v1.Project) -> Handoff:
        """One final backup of each backed-up volume whose current copy is here."""
        handoff = Handoff()
        for volume in backups.backed_up(project.spec):
            async with self._locks.hold(naming.key_of(project), volume.name):
                try:
                    snapshot = await self._final(project, volume)
                except ResticError as exc:
                    handoff.errors.append(f"volume {volume.name}: {exc.message}")
                    continue
            if snapshot:
                handoff.snapshots[volume.name] = snapshot
        return handoff

    async def _final(self, project: v1.Project, volume: v1.Volume) -> str:
        """The final snapshot's id ("" when the current copy is not here)."""
        name = naming.key_of(project)
        info = await self._docker.inspect_volume(naming.volume_name(name, volume.name, self._node))
        status = backups.volume_status(project.status, volume.name)
        if info is None or status is None or not epochs.is_current(info, status, self._node):
            return ""
        job = BackupJob(
            name, project.metadata.uid, volume, info.mountpoint, status.epoch, known=tuple(status.snapshots), final=True
        )
        result = await self._taker.take(job)
        if result.last is None:
            return ""
        last, now, vname = result.last, self._clock.now(), volume.name
        written = await write_status(
            self._client,
            name,
            lambda s: volumestatus.backup_taken(s, vname, last, result.listed, requested=None, now=now),
        )
        if self._recorder is not None:
            message = f"volume {vname}: final snapshot {short(last.id)} before the move"
            await self._recorder.event(written, NORMAL, REASON_BACKUP_TAKEN, message)
        return last.id


__all__ = ["FinalBackups", "Handoff", "REASON_BACKUP_TAKEN"]
