"""Which volumes of a project are backed up, and the one lookup of a volume's status: shared by the apiserver's
rules, the agent, the scheduler, the movers (drain, placement, restart --move) and the CLI.

Guarantees: pure; a volume is *backed up* when it is Persistent and names a repository in `backup.repository`
(the apiserver refuses a backup on any other type), and *unprotected* when it is Persistent without one.
"""

from __future__ import annotations

from caravanserai import v1


def is_persistent(volume: v1.Volume) -> bool:
    """Whether `volume` is of type Persistent."""
    return volume.type == v1.VOLUME_PERSISTENT


def is_backed_up(volume: v1.Volume) -> bool:
    """Whether `volume` is Persistent with a backup repository."""
    return is_persistent(volume) and bool(volume.backup.repository)


def backed_up(spec: v1.ProjectSpec) -> list[v1.Volume]:
    """The project's backed-up volumes, in declaration order."""
    return [volume for volume in spec.volumes if is_backed_up(volume)]


def unprotected(spec: v1.ProjectSpec) -> list[str]:
    """Names of the project's Persistent volumes without a backup: their data stays on the node a move leaves."""
    return [volume.name for volume in spec.volumes if is_persistent(volume) and not volume.backup.repository]


def repositories(spec: v1.ProjectSpec) -> tuple[str, ...]:
    """Names of the BackupRepositories the project's volumes use, sorted, without repeats."""
    return tuple(sorted({volume.backup.repository for volume in backed_up(spec)}))


def volume_status(status: v1.ProjectStatus, name: str) -> v1.VolumeStatus | None:
    """The status of volume `name` (None when none was recorded yet)."""
    for volume in status.volumes:
        if volume.name == name:
            return volume
    return None


def ensure_volume_status(status: v1.ProjectStatus, name: str) -> v1.VolumeStatus:
    """The status of volume `name` in `status` (owned by the caller), added when missing."""
    found = volume_status(status, name)
    if found is not None:
        return found
    added = status.volumes.add()
    added.name = name
    return added


__all__ = [
    "backed_up",
    "ensure_volume_status",
    "is_backed_up",
    "is_persistent",
    "repositories",
    "unprotected",
    "volume_status",
]
