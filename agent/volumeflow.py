"""The reconciler's volume steps: restore before start, backups while a project runs here, a move's hand-off, and
stale copies left behind.

    project = await flow.prepare(project)   # before the services start; RestoreFailed: they do not
    flow.follow(project)                    # after: the volumes' backup tasks
    delay = await flow.move(project)        # status.move: stop, final backups, finish_move
    delay = await flow.release(name, project)

Guarantees:

* **Restore before start** (`prepare`): see `volumes.copies`; the services are started only after it returned.
* **Moves** (`move`, for a project with `status.move` bound here): the services are stopped (containers kept),
  the volume's backup tasks stopped, a final backup taken of every backed-up volume whose current copy is here,
  then `lifecycle.finish_move` hands the snapshots over (a read-modify-write that gives up when the move is no
  longer asked of this node). A failed final backup is retried (every `MOVE_RETRY` seconds, Warning Event
  BackupFailed) until `move.deadline`; past it the project moves without that snapshot (the newest is used),
  with a Warning Event BackupFailed saying so and a note in the phase message.
* **Stale copies** (`release`, for a project no longer bound here): a backed-up Persistent volume of this
  project's incarnation whose epoch is not the status epoch is removed once the project runs elsewhere
  (Running on another node); until then the project is looked at every `STALE_POLL` seconds. Volumes without
  backup and volumes of deleted projects stay, as they always did.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.agent.volumes.backup import BackupTaker
from caravanserai.agent.volumes.copies import VolumeCopies
from caravanserai.agent.volumes.handoff import FinalBackups
from caravanserai.agent.volumes.repository import RepositoryResolver
from caravanserai.agent.volumes.restic import ResticSettings
from caravanserai.agent.volumes.scheduler import REASON_BACKUP_FAILED, BackupScheduler
from caravanserai.agent.volumes.shared import RestoreRates, VolumeLocks
from caravanserai.agent.workload.project import ProjectRuntime
from caravanserai.client import Client
from caravanserai.client.apply import modify_status
from caravanserai.clock import Clock, seconds
from caravanserai.controller import WARNING, EventRecorder
from caravanserai.project import backups, lifecycle

log = structlog.get_logger(__name__)

MOVE_RETRY = 5.0  # seconds between final backup attempts of a move before its deadline
STALE_POLL = 5.0  # seconds between looks at a project that left while its stale copies wait here


class VolumeFlow:
    """The volume steps of the agent of `node` (see the module docstring)."""

    def __init__(
        self,
        *,
        projects: ProjectRuntime,
        client: Client,
        lookup: Callable[[str], v1.Project | None],
        clock: Clock,
        recorder: EventRecorder | None = None,
        settings: ResticSettings | None = None,
    ) -> None:
        """The parts for `projects`' node: the repositories read with `client`, the backup tasks' view of the
        projects (`lookup`, the informer's cache), restic run as `settings` say."""
        docker, node = projects.docker, projects.node
        self.resolver = RepositoryResolver(client)
        self.rates = RestoreRates()
        self.locks = VolumeLocks()
        taker = BackupTaker(docker, self.resolver, clock=clock, node=node, settings=settings)
        self._copies = VolumeCopies(
            docker=docker, client=client, resolver=self.resolver, locks=self.locks, rates=self.rates, clock=clock,
            node=node, stop_timeout=projects.stop_timeout, recorder=recorder, settings=settings,
        )  # fmt: skip
        self.scheduler = BackupScheduler(
            taker=taker, docker=docker, client=client, locks=self.locks, lookup=lookup, clock=clock, node=node,
            recorder=recorder,
        )  # fmt: skip
        self._final = FinalBackups(
            taker=taker, docker=docker, client=client, locks=self.locks, clock=clock, node=node, recorder=recorder
        )
        self._projects, self._docker, self._client = projects, docker, client
        self._clock, self._node, self._recorder = clock, node, recorder
        self._handed_over: dict[str, float] = {}  # project → when the move it finished was asked for

    async def run(self) -> None:
        """Own the background backup tasks until cancelled."""
        await self.scheduler.run()

    async def prepare(self, project: v1.Project) -> v1.Project:
        """Every Persistent volume's current copy here (restored when needed); the project as last written."""
        return await self._copies.prepare(project)

    def follow(self, project: v1.Project) -> None:
        """Back up the project's volumes whose current copy is here."""
        self.scheduler.follow(project)

    async def leave(self, name: str) -> None:
        """Stop the project's backups (it finished, is being deleted, or left)."""
        await self.scheduler.forget(name)

    async def move(self, project: v1.Project) -> float | None:
        """Hand the project over (see the module docstring); seconds until the next attempt (None: done)."""
        name, asked = naming.key_of(project), seconds(project.status.move.requested_at)
        if self._handed_over.get(name) == asked:  # finished already; the cache has not caught up yet
            return None
        await self._projects.stop(name)
        await self.scheduler.forget(name)
        handoff = await self._final.take(project)
        now = self._clock.now()
        left = seconds(project.status.move.deadline) - now
        if handoff.errors and left > 0:
            for error in handoff.errors:
                await self._event(project, REASON_BACKUP_FAILED, f"final backup before the move: {error}; retrying")
            return min(MOVE_RETRY, left)
        note = ""
        if handoff.errors:
            note = (
                "no final backup of "
                + "; ".join(handoff.errors)
                + " (past the move's deadline: the newest snapshot is used)"
            )
            await self._event(project, REASON_BACKUP_FAILED, note)

        def finish(current: v1.Project) -> bool:
            if not current.status.HasField("move") or current.status.node_ref != self._node:
                return False  # the move ended otherwise meanwhile (node health, deletion)
            current.status.CopyFrom(
                lifecycle.finish_move(current, handoff=handoff.snapshots, now=now, note=note).status
            )
            return True

        _, moved = await modify_status(self._client.projects, name, finish)
        self._handed_over[name] = asked
        log.info("project handed over", project=name, snapshots=handoff.snapshots, moved=moved)
        return None

    async def release(self, name: str, project: v1.Project | None) -> float | None:
        """Remove the project's stale backed-up copies here once it runs elsewhere; seconds until the next look
        while some wait for that (None: nothing waits)."""
        if project is None:
            return None
        labels = naming.node_filter(self._node, project=name, volume_type=v1.VOLUME_PERSISTENT)
        waiting = False
        for local in await self._docker.list_volumes(labels):
            volume = next(
                (v for v in backups.backed_up(project.spec) if v.name == local.label(naming.LABEL_VOLUME)), None
            )
            if volume is None or local.label(naming.LABEL_PROJECT_UID) != project.metadata.uid:
                continue
            status = backups.volume_status(project.status, volume.name)
            if project.status.phase != v1.RUNNING or project.status.node_ref in ("", self._node):
                waiting = True  # not running elsewhere yet: its copy here may still be the one to use
            elif status is not None and status.epoch and local.label(naming.LABEL_EPOCH) != status.epoch:
                log.info("removing a stale copy", project=name, volume=volume.name, runs_on=project.status.node_ref)
                await self._docker.remove_volume(local.name)
        return STALE_POLL if waiting else None

    async def _event(self, project: v1.Project, reason: str, message: str) -> None:
        if self._recorder is not None:
            await self._recorder.event(project, WARNING, reason, message)


__all__ = ["MOVE_RETRY", "STALE_POLL", "VolumeFlow"]
