"""Restore before start: every Persistent volume of a project bound here gets its current copy on this node before
any service starts.

    project = await copies.prepare(project)      # RestoreFailed: the services must not start

Guarantees:

* **Backed-up volumes** follow `plan.decide`: a current copy is kept; otherwise the containers that mount the old
  volume are removed, the old volume is removed and a fresh one made with a new epoch label, and the chosen
  snapshot restored into it (or it stays empty, or an existing volume nobody else holds is adopted). The status
  says `restoring` with bytes done/total (every second) and Restoring=True meanwhile, and epoch and node only
  once the copy is complete: a copy left half-restored (the agent killed) is never current and is made again.
* **Failures stop the start**: any failure (repository unusable or unreachable, a wrong password, restic's error,
  a hand-off snapshot gone) is
  recorded (RestoreFailed=True with restic's reason, `lastError`), reported as a Warning Event RestoreFailed
  and raised as `RestoreFailed`, so the caller retries with backoff and starts nothing meanwhile. A repository
  that is not initialised holds no snapshot: the volume starts as on a first run (its backups then fail saying
  so, unless the repository may be initialised).
* **Restore requests** (`caractrl restore`) make a new copy from the named snapshot and are recorded as handled;
  one naming no snapshot of the volume, or whose repository cannot be read, is answered with that error (Warning
  Event RestoreFailed) and the current copy is left alone, its services running.
* **Persistent volumes without backup** keep today's behaviour (the local volume, whatever it holds); when the
  status says their data lives on another node, "volume data stays on <node>: no backup configured" is
  recorded and a Warning Event VolumeDataLeftBehind sent. Every Persistent volume served here has its node and
  epoch recorded.
* **One at a time**: making a copy holds the volume's lock (`VolumeLocks`), so no backup of it runs meanwhile.
  Status writes are read-modify-write (`modify_status`); the project returned is the last one written.
"""

from __future__ import annotations

from typing import NoReturn

from caravanserai import v1
from caravanserai.agent.docker import containers, naming
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.agent.docker.records import VolumeInfo
from caravanserai.agent.volumes import epochs, plan, snapshots, volumestatus
from caravanserai.agent.volumes.repository import RepositoryResolver
from caravanserai.agent.volumes.restic import Restic, ResticSettings
from caravanserai.agent.volumes.resticerrors import NOT_INITIALISED, ResticError
from caravanserai.agent.volumes.resticjson import Snapshot
from caravanserai.agent.volumes.restore import restore_snapshot
from caravanserai.agent.volumes.shared import RestoreRates, StatusChange, VolumeLocks, write_status
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import WARNING, EventRecorder
from caravanserai.errors import CaravanseraiError
from caravanserai.project import backups

REASON_RESTORED = "Restored"
REASON_RESTORE_FAILED = "RestoreFailed"
REASON_LEFT_BEHIND = "VolumeDataLeftBehind"


class RestoreFailed(CaravanseraiError):
    """A volume of the project could not be given its current copy here; the services must not start."""


class VolumeCopies:
    """Makes the copies of a project's Persistent volumes current on `node` (see the module docstring)."""

    def __init__(
        self,
        *,
        docker: DockerRuntime,
        client: Client,
        resolver: RepositoryResolver,
        locks: VolumeLocks,
        rates: RestoreRates,
        clock: Clock,
        node: str,
        stop_timeout: int,
        recorder: EventRecorder | None = None,
        settings: ResticSettings | None = None,
    ) -> None:
        self._docker, self._client, self._resolver = docker, client, resolver
        self._locks, self._rates, self._recorder = locks, rates, recorder
        self._clock, self._node, self._stop_timeout = clock, node, stop_timeout
        self._settings = settings or ResticSettings()

    async def prepare(self, project: v1.Project) -> v1.Project:
        """Give every Persistent volume of `project` its current copy here; the project as last written.
        `RestoreFailed` when a backed-up volume cannot have one (recorded first)."""
        for volume in project.spec.volumes:
            if backups.is_backed_up(volume):
                project = await self._backed_up(project, volume)
            elif backups.is_persistent(volume):
                project = await self._unprotected(project, volume)
        return project

    def _volume_name(self, project: v1.Project, volume: v1.Volume) -> str:
        return naming.volume_name(naming.key_of(project), volume.name, self._node)

    async def _backed_up(self, project: v1.Project, volume: v1.Volume) -> v1.Project:
        local = await self._docker.inspect_volume(self._volume_name(project, volume))
        status = backups.volume_status(project.status, volume.name)
        restic: Restic | None = None
        listed: list[Snapshot] = []
        if plan.needs_listing(volume, status, local, self._node):
            try:
                restic, listed = await self._listing(project, volume)
            except ResticError as exc:
                request = plan.requested(volume, status)
                if request is None or not epochs.is_current(local, status, self._node):
                    await self._fail(project, volume, exc.message)
                refused = plan.Plan(plan.KEEP, request=request, request_error=exc.message)
                return await self._refuse_request(project, volume, refused)  # the current copy serves on
        url = restic.repository.url if restic is not None else ""
        chosen = plan.decide(volume, status, local, self._node, listed, url=url)
        if chosen.request_error:
            project = await self._refuse_request(project, volume, chosen)
        if chosen.action == plan.KEEP:
            return await self._keep(project, volume)
        if chosen.action == plan.FAIL:
            await self._fail(project, volume, chosen.message)
        async with self._locks.hold(naming.key_of(project), volume.name):
            return await self._make_copy(project, volume, local, chosen, restic)

    async def _listing(self, project: v1.Project, volume: v1.Volume) -> tuple[Restic, list[Snapshot]]:
        """restic for the volume's repository and the volume's snapshots, newest first. A repository that is not
        initialised (and may not be initialised here) has none: the backups will say so."""
        repository = await self._resolver.resolve(volume.backup.repository, namespace=project.metadata.namespace)
        restic = Restic(repository, clock=self._clock, settings=self._settings)
        selector = snapshots.selector(project_uid=project.metadata.uid, volume=volume.name)
        try:
            return restic, await restic.snapshots(selector)
        except ResticError as exc:
            if exc.kind != NOT_INITIALISED:
                raise
            return restic, []

    async def _keep(self, project: v1.Project, volume: v1.Volume) -> v1.Project:
        """The copy here is current; a hand-off snapshot (the project came back) is done with."""
        status = backups.volume_status(project.status, volume.name)
        if status is None or not status.handoff_snapshot:
            return project
        return await self._write(
            project, lambda s: setattr(backups.ensure_volume_status(s, volume.name), "handoff_snapshot", "")
        )

    async def _make_copy(
        self, project: v1.Project, volume: v1.Volume, local: VolumeInfo | None, chosen: plan.Plan, restic: Restic | None
    ) -> v1.Project:
        now, node, name = self._clock.now(), self._node, volume.name
        if chosen.action == plan.ADOPT and local is not None:
            epoch = epochs.local_epoch(local, node)
            return await self._write(
                project,
                lambda s: volumestatus.started(s, name, epoch=epoch, node=node, message=chosen.message, now=now),
            )
        epoch = epochs.new_epoch(node)
        info = await self._fresh_volume(project, volume, epoch)
        if chosen.snapshot is not None and restic is not None:
            return await self._restore(
                project, volume, chosen, chosen.snapshot, restic, epoch=epoch, target=info.mountpoint
            )

        def empty(status: v1.ProjectStatus) -> None:
            volumestatus.started(status, name, epoch=epoch, node=node, message=chosen.message, now=now)
            _answer(status, name, chosen, now=now)

        return await self._write(project, empty)

    async def _fresh_volume(self, project: v1.Project, volume: v1.Volume, epoch: str) -> VolumeInfo:
        """Remove the containers mounting the volume and the volume, then make it again labelled `epoch`."""
        name = self._volume_name(project, volume)
        labels = naming.node_filter(self._node, project=naming.key_of(project))
        for container in await self._docker.list_containers(labels, volume=name):
            await self._docker.remove_container(
                container.id, timeout=naming.stop_timeout(container.labels, self._stop_timeout)
            )
        await self._docker.remove_volume(name)
        await self._docker.ensure_volume(containers.volume_config(project, volume, node=self._node, epoch=epoch))
        info = await self._docker.inspect_volume(name)
        if info is None or info.label(naming.LABEL_EPOCH) != epoch:
            raise RestoreFailed(f"volume {volume.name}: Docker volume {name} was not made as asked")
        return info

    async def _restore(
        self,
        project: v1.Project,
        volume: v1.Volume,
        chosen: plan.Plan,
        snapshot: Snapshot,
        restic: Restic,
        *,
        epoch: str,
        target: str,
    ) -> v1.Project:
        """Restore `snapshot` into the fresh copy `epoch` (at `target`), reporting progress; then it is current."""
        status = backups.volume_status(project.status, volume.name)
        record = snapshots.record(snapshot, {r.id: r for r in status.snapshots} if status else {})
        name, node = volume.name, self._node
        try:
            total = record.size_bytes or await restic.restore_size(record.id)
            start = self._clock.now()
            project = await self._write(
                project, lambda s: volumestatus.begin_restore(s, name, record, total=total, node=node, now=start)
            )
            began = self._clock.monotonic()

            async def progress(done: int) -> None:
                await self._write(project, lambda s: volumestatus.restore_progress(s, name, done))

            size = await restore_snapshot(restic, record.id, target, clock=self._clock, on_progress=progress)
        except ResticError as exc:
            await self._fail(project, volume, exc.message)
        self._rates.observe(restic.repository.name, size, self._clock.monotonic() - began)
        return await self._finish_restore(project, volume, chosen, epoch=epoch)

    async def _finish_restore(
        self, project: v1.Project, volume: v1.Volume, chosen: plan.Plan, *, epoch: str
    ) -> v1.Project:
        now, node, name = self._clock.now(), self._node, volume.name

        def done(status: v1.ProjectStatus) -> None:
            volumestatus.restored(status, name, epoch=epoch, node=node, now=now)
            _answer(status, name, chosen, now=now)

        project = await self._write(project, done)
        entry = backups.volume_status(project.status, name)
        await self._event(
            project, "Normal", REASON_RESTORED, f"volume {name}: {entry.message if entry else 'restored'}"
        )
        return project

    async def _refuse_request(self, project: v1.Project, volume: v1.Volume, chosen: plan.Plan) -> v1.Project:
        now, name = self._clock.now(), volume.name
        project = await self._write(project, lambda s: _answer(s, name, chosen, now=now))
        await self._event(project, WARNING, REASON_RESTORE_FAILED, f"volume {name}: {chosen.request_error}")
        return project

    async def _fail(self, project: v1.Project, volume: v1.Volume, error: str) -> NoReturn:
        """Record a failed restore of `volume`, report it, raise `RestoreFailed`."""
        now, name = self._clock.now(), volume.name
        project = await self._write(project, lambda s: volumestatus.restore_failed(s, name, error, now=now))
        await self._event(project, WARNING, REASON_RESTORE_FAILED, f"volume {name}: {error}")
        raise RestoreFailed(f"volume {name}: {error}")

    async def _unprotected(self, project: v1.Project, volume: v1.Volume) -> v1.Project:
        """Serve the local volume (made when missing); say so when the data stayed on another node."""
        name = self._volume_name(project, volume)
        local = await self._docker.inspect_volume(name)
        if local is None:
            config = containers.volume_config(project, volume, node=self._node, epoch=epochs.new_epoch(self._node))
            await self._docker.ensure_volume(config)
            local = await self._docker.inspect_volume(name)
        epoch = epochs.local_epoch(local, self._node) if local is not None else ""
        status = backups.volume_status(project.status, volume.name)
        if status is not None and (status.node, status.epoch) == (self._node, epoch):
            return project
        elsewhere = status.node if status is not None and status.node not in ("", self._node) else ""
        message = volumestatus.left_behind_message(elsewhere) if elsewhere else ""
        node, vname = self._node, volume.name
        project = await self._write(
            project, lambda s: volumestatus.serving(s, vname, epoch=epoch, node=node, message=message)
        )
        if message:
            await self._event(project, WARNING, REASON_LEFT_BEHIND, f"volume {vname}: {message}")
        return project

    async def _write(self, project: v1.Project, change: StatusChange) -> v1.Project:
        """Apply `change` to the project's status as stored now (read-modify-write); the project written."""
        return await write_status(self._client, naming.key_of(project), change)

    async def _event(self, project: v1.Project, type_: str, reason: str, message: str) -> None:
        if self._recorder is not None:
            await self._recorder.event(project, type_, reason, message)


def _answer(status: v1.ProjectStatus, volume: str, chosen: plan.Plan, *, now: float) -> None:
    """Record the restore request `chosen` answers (if any) as handled, with its error."""
    if chosen.request is not None:
        volumestatus.restore_request_handled(status, volume, chosen.request, chosen.request_error, now=now)


__all__ = ["REASON_LEFT_BEHIND", "REASON_RESTORED", "REASON_RESTORE_FAILED", "RestoreFailed", "VolumeCopies"]
