"""Who may read a BackupRepository and the Secret that opens it, against a real apiserver over mutual TLS: a node
reads both only while a project bound to it backs a volume up into that repository (two hops: project →
repository → its `spec.secret`), follows the repository to another Secret, and loses access when the project
stops using it or leaves; the node a move waits for writes `finish_move`'s status (back to Pending), and no other
node can."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import Forbidden
from caravanserai.process.tls import TLSFiles
from caravanserai.project import lifecycle
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import node, project
from caravanserai.testing.wait import wait_for

SNAPSHOT = "4f1c2a9b" * 8


def secret(name: str) -> v1.Secret:
    s = meta.with_type_meta(v1.Secret())
    s.metadata.name = name
    s.spec.data["RESTIC_PASSWORD"] = f"password of {name}".encode()
    return s


def repository(name: str, secret_name: str) -> v1.BackupRepository:
    r = meta.with_type_meta(v1.BackupRepository())
    r.metadata.name = name
    r.spec.url = f"/srv/backups/{name}"
    r.spec.secret = secret_name
    return r


def wiki() -> v1.Project:
    """A project whose Persistent volume `data` backs up into the repository `offsite`."""
    p = project("wiki")
    p.spec.services[0].volume_mounts.add(name="data", mount_path="/data")
    data = p.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT)
    data.backup.repository = "offsite"
    data.backup.every = "1m"
    data.backup.keep.last = 3
    return p


async def _setup(admin: Client) -> None:
    for name in ("n1", "n2"):
        await admin.nodes.create(node(name))
    for name in ("restic", "rotated", "unrelated"):
        await admin.secrets.create(secret(name))
    await admin.backuprepositories.create(repository("offsite", "restic"))
    await admin.backuprepositories.create(repository("unused", "unrelated"))
    created = await admin.projects.create(wiki())
    await admin.projects.update_status(lifecycle.bind(created, "n1", now=time.time()))


async def _readable(c: Client, resource: str, name: str) -> bool:
    try:
        await c.resource(resource).get(name)
    except Forbidden:
        return False
    return True


def can(c: Client, resource: str, name: str, *, expected: bool = True) -> Callable[[], Awaitable[bool]]:
    """For `wait_for`: `c` may (or, `expected=False`, may no longer) get `name` of `resource`."""

    async def check() -> bool:
        return await _readable(c, resource, name) == expected

    return check


async def _names(c: Client, resource: str) -> list[str]:
    return sorted(o.metadata.name for o in await c.resource(resource).list())


async def _watched(c: Client, resource: str) -> list[str]:
    names: list[str] = []
    async for change in c.resource(resource).watch(resource_version="0"):
        if change.type == v1.BOOKMARK:
            break
        names.append(change.object.metadata.name)
    return sorted(names)


async def _use_backups(admin: Client, used: bool) -> None:
    """The project stops (or starts again) backing its volume up, staying bound."""
    current = await admin.projects.get("wiki")
    if used:
        current.spec.volumes[0].CopyFrom(wiki().spec.volumes[0])
    else:
        current.spec.volumes[0].ClearField("backup")
    await admin.projects.update(current)


@pytest.fixture
async def clients(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles]
) -> AsyncIterator[tuple[Client, Client, Client]]:
    """Admin, node:n1 and node:n2 clients; `wiki` (backing up into `offsite`) bound to n1 and seen by the cache."""
    async with (
        Client(secure_api.address, tls=tls_of("admin")) as admin,
        Client(secure_api.address, tls=tls_of("node:n1"), retry_timeout=1) as n1,
        Client(secure_api.address, tls=tls_of("node:n2"), retry_timeout=1) as n2,
    ):
        await _setup(admin)
        # the binding reached the node graph: the repository (through the project) and its Secret (through the
        # repository, whose own cache event may come a moment later)
        await wait_for(can(n1, "backuprepositories", "offsite"), timeout=10)
        await wait_for(can(n1, "secrets", "restic"), timeout=10)
        yield admin, n1, n2


async def test_a_node_reads_the_repository_and_its_secret_while_a_bound_project_uses_it(
    clients: tuple[Client, Client, Client],
) -> None:
    admin, n1, n2 = clients
    assert await _readable(n1, "secrets", "restic")
    assert await _names(n1, "backuprepositories") == ["offsite"]
    assert await _names(n1, "secrets") == ["restic"]
    assert await asyncio.wait_for(_watched(n1, "secrets"), 10) == ["restic"]
    assert await asyncio.wait_for(_watched(n1, "backuprepositories"), 10) == ["offsite"]
    for who, resource, name in (
        (n1, "backuprepositories", "unused"),
        (n1, "secrets", "unrelated"),
        (n1, "secrets", "rotated"),
        (n2, "backuprepositories", "offsite"),
        (n2, "secrets", "restic"),
    ):
        assert not await _readable(who, resource, name), (resource, name)
    assert await _names(n2, "backuprepositories") == [] and await _names(n2, "secrets") == []
    with pytest.raises(Forbidden):  # reading is all a node does with a repository
        await n1.backuprepositories.update(await admin.backuprepositories.get("offsite"))

    # The repository names another Secret: the node follows it, and the old one is closed.
    offsite = await admin.backuprepositories.get("offsite")
    offsite.spec.secret = "rotated"
    await admin.backuprepositories.update(offsite)
    await wait_for(can(n1, "secrets", "rotated"), timeout=10)
    assert not await _readable(n1, "secrets", "restic")

    # The bound project stops backing up: access ends; it starts again: access returns.
    await _use_backups(admin, used=False)
    await wait_for(can(n1, "backuprepositories", "offsite", expected=False), timeout=10)
    assert not await _readable(n1, "secrets", "rotated") and await _names(n1, "secrets") == []
    await _use_backups(admin, used=True)
    await wait_for(can(n1, "secrets", "rotated"), timeout=10)


async def test_the_node_a_move_waits_for_finishes_it_and_then_loses_access(
    clients: tuple[Client, Client, Client],
) -> None:
    admin, n1, n2 = clients
    now = time.time()
    running = lifecycle.run(await admin.projects.get("wiki"), reason="Started", message="running", now=now)
    running = await n1.projects.update_status(running)  # the agent's own write, while bound
    asked = lifecycle.move(
        running, reason=lifecycle.REASON_NODE_DRAINED, message="drained", now=now, handoff_until=now + 300
    )
    await admin.projects.update_status(asked)  # what drain does (as admin)

    seen = await n1.projects.get("wiki")
    assert seen.status.HasField("move") and seen.status.node_ref == "n1"
    done = lifecycle.finish_move(seen, handoff={"data": SNAPSHOT}, now=time.time())
    with pytest.raises(Forbidden):
        await n2.projects.update_status(done)  # not its project
    unbound_without_move = lifecycle.finish_move(seen, handoff={}, now=time.time())
    unbound_without_move.status.move.CopyFrom(seen.status.move)  # unbinding while keeping the move: refused
    with pytest.raises(Forbidden):
        await n1.projects.update_status(unbound_without_move)
    stored = await n1.projects.update_status(done)
    assert stored.status.phase == v1.PENDING and not stored.status.node_ref and not stored.status.HasField("move")
    assert stored.status.volumes[0].handoff_snapshot == SNAPSHOT

    await wait_for(can(n1, "backuprepositories", "offsite", expected=False), timeout=10)
    assert not await _readable(n1, "secrets", "restic")
    assert await _names(n1, "backuprepositories") == [] and await _names(n1, "secrets") == []
    with pytest.raises(Forbidden):  # no longer its project: no more status writes
        await n1.projects.update_status(lifecycle.bind(stored, "n1", now=time.time()))
