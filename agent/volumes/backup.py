"""One backup of one volume: the `before` hook, `restic backup`, `restic forget --prune` by `keep`, the listing.

    result = await BackupTaker(docker, resolver, clock=clock, node="node-a").take(job)

Guarantees:

* **The hook first.** `before` runs in the named service's running container through Docker's exec API and must
  exit 0 within its timeout (default 60s); otherwise the backup fails ("before hook in service db exited with 3:
  …", "… did not finish within 5s") and restic is not run. A hook whose service is not running fails the backup,
  except for a move's final backup (`job.final`: the services are stopped on purpose), which skips it.
* **Then restic** in the volume's data directory (path `.`), tagged as `snapshots.tags` says, then `forget
  --prune` over the volume's snapshots only (one group), then the listing of what is left.
* **The result** is the new snapshot's record (id in full, time, node, epoch, size, bytes added, duration) and
  the volume's snapshots newest first, with the sizes known from `job.known`. An empty volume has nothing to
  back up (restic 0.14 saves no empty snapshot): the result then has no new snapshot (`last` None), only the
  listing, and is no failure. Every failure is a `ResticError`
  with one line (the hook's too: kind `HOOK`); nothing is written to the project here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog

from caravanserai import meta, v1
from caravanserai.agent.docker import execapi, naming
from caravanserai.agent.docker.calls import DockerError
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.agent.volumes import snapshots
from caravanserai.agent.volumes.repository import RepositoryResolver
from caravanserai.agent.volumes.restic import Restic, ResticSettings
from caravanserai.agent.volumes.resticerrors import EMPTY, FAILED, ResticError
from caravanserai.clock import Clock, run_within
from caravanserai.text.durations import format_duration, parse_duration

log = structlog.get_logger(__name__)

HOOK = "HookFailed"
DEFAULT_HOOK_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class BackupJob:
    """What to back up: volume `volume` of the project (key, uid) from the copy `epoch` in `mountpoint`."""

    project: str
    project_uid: str
    volume: v1.Volume
    mountpoint: str
    epoch: str
    known: Sequence[v1.SnapshotRecord] = field(default_factory=tuple)
    final: bool = False


@dataclass(frozen=True, slots=True)
class BackupResult:
    """The new snapshot (None: the volume is empty), the volume's snapshots after pruning (newest first), the
    seconds the whole run took."""

    last: v1.SnapshotRecord | None
    listed: list[v1.SnapshotRecord]
    took: float


class BackupTaker:
    """Takes backups of this node's volumes (see the module docstring)."""

    def __init__(
        self,
        docker: DockerRuntime,
        resolver: RepositoryResolver,
        *,
        clock: Clock,
        node: str,
        settings: ResticSettings | None = None,
    ) -> None:
        self._docker = docker
        self._resolver = resolver
        self._clock = clock
        self._node = node
        self._settings = settings or ResticSettings()

    async def take(self, job: BackupJob) -> BackupResult:
        """Hook, backup, forget --prune, list; `ResticError` when any step fails."""
        started = self._clock.monotonic()
        await self.run_hook(job)
        namespace = meta.split_key(job.project)[0]  # `project` is the key of the project
        repository = await self._resolver.resolve(job.volume.backup.repository, namespace=namespace)
        restic = Restic(repository, clock=self._clock, settings=self._settings)
        tags = snapshots.tags(project_uid=job.project_uid, volume=job.volume.name, node=self._node, epoch=job.epoch)
        selector = snapshots.selector(project_uid=job.project_uid, volume=job.volume.name)
        try:
            summary = await restic.backup(job.mountpoint, host=self._node, tags=tags)
        except ResticError as exc:
            if exc.kind != EMPTY:
                raise
            unchanged = snapshots.records(await restic.snapshots(selector), job.known)
            return BackupResult(None, unchanged, self._clock.monotonic() - started)
        keep = snapshots.keep_flags(job.volume.backup.keep)
        if keep:
            await restic.forget(selector, keep)
        listed = await restic.snapshots(selector)
        new = snapshots.find(listed, summary.snapshot_id)
        if new is None:
            raise ResticError(FAILED, f"snapshot {summary.snapshot_id} of the backup is not listed after pruning")
        last = snapshots.record(new, {})
        last.size_bytes, last.bytes_added = summary.total_bytes, summary.data_added
        last.duration_seconds = summary.duration
        listed_records = snapshots.records(listed, [*job.known, last])
        return BackupResult(last, listed_records, self._clock.monotonic() - started)

    async def run_hook(self, job: BackupJob) -> None:
        """Run the volume's `before` hook (if any) in its service's running container; `ResticError` (kind
        `HOOK`) when it fails, hangs past its timeout or its service does not run (skipped for a final backup)."""
        hook = job.volume.backup.before
        if not hook.command:
            return
        where = f"before hook in service {hook.service}"
        name = naming.container_name(job.project, hook.service, self._node)
        try:
            found = await self._docker.inspect_container(name)
        except DockerError as exc:
            raise ResticError(HOOK, f"{where}: {exc.message}") from None
        if found is None or not found.running:
            if job.final:
                log.info("final backup without its hook: the service is stopped", project=job.project, hook=where)
                return
            raise ResticError(HOOK, f"{where}: the service is not running")
        timeout = parse_duration(hook.timeout) if hook.timeout else DEFAULT_HOOK_TIMEOUT
        await self._exec_hook(found.container_id, tuple(hook.command), where=where, timeout=timeout)

    async def _exec_hook(self, container_id: str, command: tuple[str, ...], *, where: str, timeout: float) -> None:
        try:
            result = await run_within(self._clock, execapi.run_command(self._docker, container_id, command), timeout)
        except TimeoutError:
            raise ResticError(HOOK, f"{where} did not finish within {format_duration(timeout)}") from None
        except DockerError as exc:
            raise ResticError(HOOK, f"{where}: {exc.message}") from None
        if result.exit_code != 0:
            lines = result.output.decode(errors="replace").strip().splitlines()
            said = f": {lines[-1].strip()}" if lines else ""
            raise ResticError(HOOK, f"{where} exited with {result.exit_code}{said}")


__all__ = ["BackupJob", "BackupResult", "BackupTaker", "DEFAULT_HOOK_TIMEOUT", "HOOK"]
