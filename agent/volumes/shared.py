"""What the volume parts of one agent share: a lock per volume, the restore rates the node observed, and the one
way they write a project's status.

Guarantees:

* **One operation per volume at a time.** Backups (periodic, requested, final) and restores of one (project,
  volume) take `VolumeLocks.hold(project, volume)`, so they never overlap; different volumes run in parallel.
* **Restore rates** (`RestoreRates`): per BackupRepository name, the bytes per second of the node's last restore
  from it (bytes restored / seconds the restore took); `changed` is set on every new figure so the node's status
  is written soon after.
* **Status writes** (`write_status`) are read-modify-write on the project as stored (UpdateStatus with the
  version read, read again on Conflict), so the reconcile and the background backups never undo each other's
  writes; nothing is written when the change changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.client.apply import modify_status

StatusChange = Callable[[v1.ProjectStatus], None]
"""A change of a project's status, applied in place to a copy owned by the writer."""


class VolumeLocks:
    """An `asyncio.Lock` per (project, volume), made on first use."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def hold(self, project: str, volume: str) -> asyncio.Lock:
        """The lock of `volume` of `project` (use it with `async with`)."""
        return self._locks.setdefault((project, volume), asyncio.Lock())

    def forget(self, project: str) -> None:
        """Drop the project's locks nobody holds (a project that left the node)."""
        for key in [k for k, lock in self._locks.items() if k[0] == project and not lock.locked()]:
            del self._locks[key]


class RestoreRates:
    """Download rates observed by this node's restores, by repository (bytes per second)."""

    def __init__(self) -> None:
        self._rates: dict[str, float] = {}
        self.changed = asyncio.Event()

    def observe(self, repository: str, size: int, took: float) -> None:
        """Record a restore of `size` bytes from `repository` that took `took` seconds (ignored when either is 0)."""
        if size > 0 and took > 0:
            self._rates[repository] = size / took
            self.changed.set()

    def rates(self) -> dict[str, float]:
        """The last rate per repository."""
        return dict(self._rates)


async def write_status(client: Client, name: str, change: StatusChange) -> v1.Project:
    """Apply `change` to the status of project `name` as stored now and write it (see the module docstring);
    the project as written (or as read, when nothing changed). NotFound, Forbidden and FailedPrecondition (the
    project gone, moved or finished) come as the client raises them."""

    def mutate(current: v1.Project) -> bool:
        before = current.status.SerializeToString(deterministic=True)
        change(current.status)
        return current.status.SerializeToString(deterministic=True) != before

    written, _ = await modify_status(client.projects, name, mutate)
    if not isinstance(written, v1.Project):
        raise TypeError(f"project {name}: the API answered with a {type(written).__name__}")
    return written


__all__ = ["RestoreRates", "StatusChange", "VolumeLocks", "write_status"]
