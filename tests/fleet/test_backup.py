"""Backup and restore of the fleet's etcd as docs/fleet.md tells operators: `etcdctl snapshot save`, destroy the
cluster, `etcdctl snapshot restore` on every member, start again: the same objects are there."""

from __future__ import annotations

from caravanserai.testing import builders
from support.fleet import Fleet


async def test_snapshot_destroy_restore_gives_back_the_same_objects(fleet: Fleet) -> None:
    names = [f"backup-{i}" for i in range(5)]
    async with fleet.client(timeout=10, retry_timeout=60) as client:
        for name in names:  # a selector no node matches: they stay Pending, nothing runs
            await client.projects.create(builders.project(name, node_selector={"backup": "nowhere"}))
        before = {p.metadata.name: p for p in await client.projects.list(field_selector="status.phase=Pending")}
    snapshot = fleet.workdir / "backup.db"
    await fleet.etcd.snapshot(snapshot)

    clients = [*fleet.agents.values(), *fleet.controllers, *fleet.apiservers]
    for process in clients:
        await process.stop()
    await fleet.etcd.stop()  # destroyed: restore() removes every member's data before restoring
    await fleet.etcd.restore(snapshot)
    for process in reversed(clients):
        await process.start()
    await fleet.wait_serving()

    async with fleet.client(timeout=10, retry_timeout=60) as client:
        after = {p.metadata.name: p for p in await client.projects.list()}
    for name in names:
        assert after[name].metadata.uid == before[name].metadata.uid
        assert after[name].spec == before[name].spec
        assert after[name].metadata.creation_timestamp == before[name].metadata.creation_timestamp
    await fleet.wait_nodes_ready()
