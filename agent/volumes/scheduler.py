"""The backups of this node's volumes, in the background: one task per (project, volume) whose current copy is
here, started and stopped as projects come and go.

    scheduler.follow(project)     # after each reconcile of a project that runs here
    await scheduler.forget(name)  # the project left, finished, or is moving
    await scheduler.run()         # owns the tasks; cancelling it stops them all

Guarantees:

* **When**: as `schedule` says (every `every` from the start of the last run, at once on a `caractrl backup`
  request); a failed run is retried
  after a growing pause (2s doubling, at most `every`). A task ends by itself when the project is no longer
  Scheduled/Running here, is moving, or the volume's current copy is no longer this node's copy it serves.
* **Never two runs of one volume at once**: a run holds the volume's lock (`VolumeLocks`), as restores and final
  backups do, and checks under it that its copy is still current.
* **What is recorded** (read-modify-write): on success last backup, snapshots, error cleared, the request
  answered, BackupOverdue cleared, Event BackupTaken (an empty volume, which restic cannot save, counts as
  backed up: nothing can be lost); a run that took longer than `every` also a Warning Event
  BackupSlow. On failure `lastError` and a Warning Event BackupFailed with the reason (the request answered all
  the same). Overdue: BackupOverdue=True and a Warning Event BackupOverdue, once per overdue spell. The services
  are never touched.
* Status writes refused because the project is gone or no longer bound here end the task; an API that does not
  answer is retried at the next wake-up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog
from google.protobuf.timestamp_pb2 import Timestamp

from caravanserai import meta, v1
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.agent.volumes import epochs, schedule, volumestatus
from caravanserai.agent.volumes.backup import BackupJob, BackupResult, BackupTaker
from caravanserai.agent.volumes.resticerrors import ResticError
from caravanserai.agent.volumes.shared import StatusChange, VolumeLocks, write_status
from caravanserai.agent.volumes.snapshots import short
from caravanserai.backoff import Backoff, BackoffState
from caravanserai.client import Client
from caravanserai.clock import Clock, run_within, seconds
from caravanserai.controller import NORMAL, WARNING, EventRecorder
from caravanserai.errors import CaravanseraiError, FailedPrecondition, Forbidden, NotFound
from caravanserai.project import backups
from caravanserai.text.quantity import format_bytes

log = structlog.get_logger(__name__)

REASON_BACKUP_TAKEN = "BackupTaken"
REASON_BACKUP_FAILED = "BackupFailed"
REASON_BACKUP_OVERDUE = "BackupOverdue"
REASON_BACKUP_SLOW = "BackupSlow"
RETRY = Backoff(initial=2.0, cap=300.0, jitter=0.2, reset_after=None)
GONE = (NotFound, Forbidden, FailedPrecondition)  # the project is gone, or no longer bound here
TAKEN, FAILED_RUN, ENDED = "taken", "failed", "ended"


@dataclass(slots=True)
class VolumeTask:
    """One volume's backup task and what it remembers between runs."""

    project: str
    volume: str
    epoch: str
    since: float  # when the copy was made (due `every` after it while there is no backup)
    backoff: BackoffState
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    started: float = 0.0  # when this task's last successful run began (the next is due `every` after it)
    succeeded: float = 0.0  # when its last successful backup was taken (the informer may not show it yet)
    answered: float = 0.0  # the last request this task answered
    retry_at: float = 0.0  # after a failure, not before this
    task: asyncio.Task[None] | None = None


class BackupScheduler:
    """Runs the periodic and requested backups of this node's volumes (see the module docstring)."""

    def __init__(
        self,
        *,
        taker: BackupTaker,
        docker: DockerRuntime,
        client: Client,
        locks: VolumeLocks,
        lookup: Callable[[str], v1.Project | None],
        clock: Clock,
        node: str,
        recorder: EventRecorder | None = None,
    ) -> None:
        self._taker, self._docker, self._client, self._locks = taker, docker, client, locks
        self._lookup, self._clock, self._node, self._recorder = lookup, clock, node, recorder
        self._tasks: dict[tuple[str, str], VolumeTask] = {}

    def follow(self, project: v1.Project) -> None:
        """Run a task for each backed-up volume of `project` whose current copy is here, wake the running ones
        (a request may be new), and stop those of volumes no longer backed up or served here."""
        name, wanted = naming.key_of(project), set()
        for volume in backups.backed_up(project.spec):
            status = backups.volume_status(project.status, volume.name)
            if status is None or status.node != self._node or not status.epoch:
                continue
            key = (name, volume.name)
            wanted.add(key)
            known = self._tasks.get(key)
            if known is not None and known.task is not None and not known.task.done() and known.epoch == status.epoch:
                known.wake.set()
                continue
            if known is not None and known.task is not None:
                known.task.cancel()
            self._start(name, volume.name, status.epoch)
        for key in [k for k in self._tasks if k[0] == name and k not in wanted]:
            self._stop(key)

    def _start(self, project: str, volume: str, epoch: str) -> None:
        entry = VolumeTask(project, volume, epoch, since=self._clock.now(), backoff=RETRY.start(self._clock))
        entry.task = asyncio.create_task(self._loop(entry), name=f"backups-{project}-{volume}")
        self._tasks[(project, volume)] = entry

    def _stop(self, key: tuple[str, str]) -> asyncio.Task[None] | None:
        entry = self._tasks.pop(key, None)
        if entry is None or entry.task is None:
            return None
        entry.task.cancel()
        return entry.task

    async def forget(self, project: str) -> None:
        """Stop the project's tasks (a run in progress is cancelled: restic is stopped) and wait for them."""
        stopped = [t for t in (self._stop(k) for k in list(self._tasks) if k[0] == project) if t is not None]
        if stopped:
            await asyncio.wait(stopped)
        self._locks.forget(project)

    async def run(self) -> None:
        """Own the tasks until cancelled; then stop them all."""
        try:
            await asyncio.Event().wait()
        finally:
            stopped = [t for t in (self._stop(k) for k in list(self._tasks)) if t is not None]
            if stopped:
                await asyncio.wait(stopped)

    # ---- one volume's task -------------------------------------------------------------------------------

    async def _loop(self, entry: VolumeTask) -> None:
        """The task: `_turn` until it says to end; API and Docker failures are retried after a pause."""
        with contextlib.suppress(CaravanseraiError):  # else the copy counts as made when the task started
            info = await self._docker.inspect_volume(naming.volume_name(entry.project, entry.volume, self._node))
            if info is not None and info.created:
                entry.since = info.created
        while True:
            try:
                if not await self._turn(entry):
                    return
            except GONE:
                return
            except ValueError as exc:  # an unreadable `every` (the apiserver refuses it; an older object may have it)
                log.error("backup task stopped", project=entry.project, volume=entry.volume, error=str(exc))
                return
            except CaravanseraiError as exc:
                log.warning("backup task: will try again", project=entry.project, volume=entry.volume, error=str(exc))
                await self._sleep(entry, RETRY.cap / 10)

    def _wanted(self, entry: VolumeTask) -> tuple[v1.Project, v1.Volume] | None:
        """The project and volume while this task should still run (see the module docstring)."""
        project = self._lookup(entry.project)
        if project is None or project.status.node_ref != self._node or project.status.HasField("move"):
            return None
        if project.status.phase not in (v1.SCHEDULED, v1.RUNNING) or project.metadata.HasField("deletion_timestamp"):
            return None
        volume = next((v for v in backups.backed_up(project.spec) if v.name == entry.volume), None)
        status = backups.volume_status(project.status, entry.volume)
        if volume is None or status is None or (status.node, status.epoch) != (self._node, entry.epoch):
            return None
        return project, volume

    async def _turn(self, entry: VolumeTask) -> bool:
        """One wake-up: run a backup when due, else sleep until something is due; note an overdue spell after a
        failed run or before sleeping. False when the task should end."""
        found = self._wanted(entry)
        if found is None:
            return False
        project, volume = found
        status = backups.volume_status(project.status, volume.name)
        every, now = schedule.every_of(volume), self._clock.now()
        overdue_at = schedule.overdue_at(status, every, succeeded=entry.succeeded, since=entry.since)
        request = schedule.requested(volume, status, answered=entry.answered)
        due_at = schedule.due_at(status, every, started=entry.started, since=entry.since)
        due = now if request is not None else max(due_at, entry.retry_at)
        if due <= now:
            outcome = await self._run(entry, request, every)
            if outcome != FAILED_RUN:
                return outcome == TAKEN
            now = self._clock.now()
        if now >= overdue_at:
            await self._overdue(project, volume.name, schedule.overdue_message(status, every, now=now))
        wake = max(due, entry.retry_at)
        await self._sleep(entry, (min(wake, overdue_at) if now < overdue_at else wake) - now)
        return True

    async def _sleep(self, entry: VolumeTask, delay: float) -> None:
        """Sleep `delay` seconds or until woken (`follow`)."""
        with contextlib.suppress(TimeoutError):
            await run_within(self._clock, entry.wake.wait(), max(delay, 0.0))
        entry.wake.clear()

    async def _run(self, entry: VolumeTask, request: Timestamp | None, every: float) -> str:
        """One backup under the volume's lock: TAKEN, FAILED_RUN, or ENDED (the copy is no longer served)."""
        async with self._locks.hold(entry.project, entry.volume):
            found = self._wanted(entry)
            if found is None:
                return ENDED
            project, volume = found
            info = await self._docker.inspect_volume(naming.volume_name(entry.project, entry.volume, self._node))
            status = backups.volume_status(project.status, volume.name)
            if not epochs.is_current(info, status, self._node) or info is None or status is None:
                return ENDED
            job = BackupJob(
                entry.project, project.metadata.uid, volume, info.mountpoint, entry.epoch, known=tuple(status.snapshots)
            )
            began = self._clock.now()
            try:
                result = await self._taker.take(job)
            except ResticError as exc:
                await self._failed(entry, project, exc.message, request, every)
                return FAILED_RUN
        entry.started = began
        await self._taken(entry, project, result, request, every)
        return TAKEN

    async def _taken(
        self, entry: VolumeTask, project: v1.Project, result: BackupResult, request: Timestamp | None, every: float
    ) -> None:
        now, name = self._clock.now(), entry.volume
        entry.succeeded = seconds(result.last.time) if result.last is not None else now
        entry.retry_at = 0.0
        entry.answered = max(entry.answered, seconds(request) if request is not None else 0.0)
        entry.backoff.reset()
        project = await self._write(
            entry.project,
            lambda s: volumestatus.backup_taken(s, name, result.last, result.listed, requested=request, now=now),
        )
        last = result.last
        message = (
            f"volume {name}: snapshot {short(last.id)} ({format_bytes(last.size_bytes)} in all, "
            f"{format_bytes(last.bytes_added)} added, {last.duration_seconds:.1f}s)"
            if last is not None
            else f"volume {name}: empty, nothing to back up (restic saves no empty snapshot)"
        )
        await self._event(project, NORMAL, REASON_BACKUP_TAKEN, message)
        if result.took > every:
            await self._event(project, WARNING, REASON_BACKUP_SLOW, schedule.slow_message(name, result.took, every))

    async def _failed(
        self, entry: VolumeTask, project: v1.Project, error: str, request: Timestamp | None, every: float
    ) -> None:
        now, name = self._clock.now(), entry.volume
        entry.retry_at = now + min(entry.backoff.next_delay(), every)
        entry.answered = max(entry.answered, seconds(request) if request is not None else 0.0)
        log.warning("backup failed", project=entry.project, volume=name, error=error)
        project = await self._write(
            entry.project, lambda s: volumestatus.backup_failed(s, name, error, requested=request, now=now)
        )
        await self._event(project, WARNING, REASON_BACKUP_FAILED, f"volume {name}: {error}")

    async def _overdue(self, project: v1.Project, volume: str, message: str) -> None:
        """BackupOverdue=True and its Event, once per spell."""
        current = meta.get_condition(project.status.conditions, v1.CONDITION_BACKUP_OVERDUE)
        if current is not None and current.status == v1.TRUE:
            return
        now, fresh = self._clock.now(), []

        def mark(status: v1.ProjectStatus) -> None:
            fresh.append(volumestatus.overdue(status, volume, message, now=now))

        written = await self._write(naming.key_of(project), mark)
        if fresh and fresh[-1]:
            await self._event(written, WARNING, REASON_BACKUP_OVERDUE, f"volume {volume}: {message}")

    async def _write(self, name: str, change: StatusChange) -> v1.Project:
        return await write_status(self._client, name, change)

    async def _event(self, project: v1.Project, type_: str, reason: str, message: str) -> None:
        if self._recorder is not None:
            await self._recorder.event(project, type_, reason, message)


__all__ = [
    "BackupScheduler",
    "REASON_BACKUP_FAILED",
    "REASON_BACKUP_OVERDUE",
    "REASON_BACKUP_SLOW",
    "REASON_BACKUP_TAKEN",
    "VolumeTask",
]
