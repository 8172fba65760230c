"""Helpers for the volume backup and restore tests: repositories, backed-up projects, requests, moves, reading a
volume's files and the Events about it."""

from __future__ import annotations

import json
import pathlib

from agent_harness import docker

from caravanserai import meta, v1
from caravanserai.agent.docker import naming
from caravanserai.client import Client
from caravanserai.client.apply import modify
from caravanserai.clock import SystemClock, seconds, timestamp
from caravanserai.project import backups, lifecycle
from caravanserai.testing.builders import project
from caravanserai.testing.restic import ResticRepository, local_repository_url
from caravanserai.testing.wait import wait_for

CLOCK = SystemClock()
VOLUME = "data"
SERVICE = "app"
COUNTER = (
    "n=$(cat /data/n 2>/dev/null || echo 0); echo start=$n > /data/start; "
    "while true; do n=$((n+1)); echo $n > /data/n; sync; sleep 0.2; done"
)
"""The issue's counter, which also notes the value it started from (in /data/start)."""


async def local_repository(tmp_path: pathlib.Path, password: str, *, initialise: bool = True) -> ResticRepository:
    """A local-path repository in `tmp_path` (initialised unless told not to)."""
    repository = ResticRepository(local_repository_url(tmp_path / "repo"), password)
    if initialise:
        await repository.init()
    return repository


async def add_repository(
    client: Client, name: str, url: str, password: str, *, initialize: bool = False
) -> v1.BackupRepository:
    """A Secret `<name>-restic` with RESTIC_PASSWORD and a BackupRepository `name` using it."""
    secret = meta.with_type_meta(v1.Secret())
    secret.metadata.name = f"{name}-restic"
    secret.spec.data["RESTIC_PASSWORD"] = password.encode()
    await client.secrets.create(secret)
    repo = meta.with_type_meta(v1.BackupRepository())
    repo.metadata.name = name
    repo.spec.url, repo.spec.secret, repo.spec.initialize = url, secret.metadata.name, initialize
    return await client.resource(v1.BackupRepository).create(repo)


async def set_password(client: Client, repository: str, password: str) -> None:
    """Change the repository's Secret's RESTIC_PASSWORD."""

    def change(secret: v1.Secret) -> bool:
        secret.spec.data["RESTIC_PASSWORD"] = password.encode()
        return True

    await modify(client.secrets, f"{repository}-restic", change)


def backed_up(
    name: str,
    image: str,
    repository: str,
    *,
    command: str = "sleep 3600",
    every: str = "1h",
    restore: str = "",
) -> v1.Project:
    """A project whose one service `app` mounts the backed-up Persistent volume `data` at /data."""
    p = project(name, image=image, services=[SERVICE], command=["sh", "-c", command])
    volume = p.spec.volumes.add(name=VOLUME, type=v1.VOLUME_PERSISTENT, restore=restore)
    volume.backup.repository, volume.backup.every = repository, every
    volume.backup.keep.last = 10
    p.spec.services[0].volume_mounts.add(name=VOLUME, mount_path="/data")
    return p


async def request_backup(client: Client, name: str) -> float:
    """Stamp `backup.requestedAt` (as `caractrl backup` does); the stamp."""
    now = CLOCK.now()

    def stamp(p: v1.Project) -> bool:
        p.spec.volumes[0].backup.requested_at.CopyFrom(timestamp(now))
        return True

    await modify(client.projects, name, stamp)
    return now


async def backup_answered(client: Client, name: str, stamp: float, *, timeout: float = 30.0) -> v1.VolumeStatus:
    """Wait until the volume's `backupRequestHandled` reaches `stamp`; its status."""

    async def answered() -> v1.VolumeStatus | None:
        status = volume_status(await client.projects.get(name))
        return status if status is not None and seconds(status.backup_request_handled) >= stamp - 1e-6 else None

    return await wait_for(answered, timeout=timeout, message=f"backup request of {name} answered")


async def back_up_now(client: Client, name: str) -> v1.VolumeStatus:
    """Request a backup and wait for its success; the volume's status."""
    status = await backup_answered(client, name, await request_backup(client, name))
    assert not status.last_error, status.last_error
    return status


def volume_status(p: v1.Project) -> v1.VolumeStatus | None:
    return backups.volume_status(p.status, VOLUME)


async def unbind(client: Client, name: str) -> v1.Project:
    """Return the project to Pending as node health does for a dead node (no hand-off)."""
    current = await client.projects.get(name)
    pending = lifecycle.return_to_pending(current, reason="NodeLost", message="by the test", now=CLOCK.now())
    return await client.projects.update_status(pending)


async def ask_move(client: Client, name: str, *, deadline: float = 60.0) -> v1.Project:
    """Ask the project's node to move it (as drain does): `lifecycle.move` with `status.move`."""
    current = await client.projects.get(name)
    now = CLOCK.now()
    moved = lifecycle.move(
        current, reason="NodeDrained", message="drained by the test", now=now, handoff_until=now + deadline
    )
    return await client.projects.update_status(moved)


def volume_name(name: str, node: str) -> str:
    return naming.volume_name(name, VOLUME, node)


def volume_label(name: str, node: str, label: str) -> str:
    """A label of the project's `data` volume on `node` ("" when the volume or label is absent)."""
    out = docker("volume", "inspect", "-f", "{{json .Labels}}", volume_name(name, node), check=False)
    labels = json.loads(out) if out.startswith("{") else None
    return str(labels.get(label, "")) if isinstance(labels, dict) else ""


def read_volume(name: str, node: str, path: str) -> str:
    """A file of the project's `data` volume on `node`, read from the host ("" when absent)."""
    mountpoint = docker("volume", "inspect", "-f", "{{.Mountpoint}}", volume_name(name, node))
    target = pathlib.Path(mountpoint) / path
    return target.read_text().strip() if target.exists() else ""


def exec_in(name: str, node: str, command: str) -> str:
    """Run `sh -c command` in the project's `app` container on `node`; its output."""
    return docker("exec", naming.container_name(name, SERVICE, node), "sh", "-c", command)


async def events(client: Client, name: str, reason: str) -> list[v1.Event]:
    found = (await client.events.list()).items
    return [e for e in found if e.spec.involved_object.name == name and e.spec.reason == reason]


def condition(p: v1.Project, type_: str) -> v1.Condition | None:
    return meta.get_condition(p.status.conditions, type_)
