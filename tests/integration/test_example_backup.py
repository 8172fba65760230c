"""The Backup operator (examples/backup-operator) against a real apiserver: a Manager runs it, runs appear on
schedule owned by their Backup, the status is written, the operator's own metric is on /metrics, and the garbage
collector deletes the runs with their Backup."""

from __future__ import annotations

import asyncio
from typing import Any

from caravanserai import meta
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.gc import app as gc
from caravanserai.testing import running, wait_for
from support import http
from support.examples import backup_operator

ops = backup_operator()


async def define_kinds(client: Client) -> None:
    m = ops.messages
    await client.define(ops.Backup, spec=m.BackupSpec, status=m.BackupStatus, group=ops.GROUP)
    await client.define(ops.BackupRun, spec=m.BackupRunSpec, status=m.BackupRunStatus, group=ops.GROUP)


def metrics_text(port: int) -> str:
    return http.get_ok(f"http://127.0.0.1:{port}/metrics").decode()


async def test_backup_operator_against_the_apiserver(cara_client: Client) -> None:
    await define_kinds(cara_client)
    manager = Manager(cara_client, metrics_port=0)
    ops.build(cara_client, manager=manager)
    backups, runs = cara_client.resource(ops.Backup), cara_client.resource(ops.BackupRun)
    obj = meta.with_type_meta(ops.Backup())
    obj.metadata.name = "nightly"
    obj.spec.volume, obj.spec.interval, obj.spec.keep = "data", 1, 2
    async with running(manager):
        created = await backups.create(obj)

        async def three_runs() -> Any:
            current = await backups.get("nightly")
            return current if current.status.runs >= 3 else None

        status = (await wait_for(three_runs, 20)).status
        assert meta.get_condition(status.conditions, "Scheduled") is not None
        listed = await wait_for(lambda: _at_most(runs, 2), 10)
        assert all(meta.controller_of(r).uid == created.metadata.uid for r in listed)
        text = await asyncio.to_thread(metrics_text, manager.metrics_port)  # the server runs on this loop
        assert "backup_runs_started_total" in text
        assert 'caravanserai_controller_reconcile_total{controller="backup"' in text

    collector = Manager(cara_client)
    gc.setup(collector, cara_client, SystemClock(), gc.GCOptions(owner_resync=0.2))
    async with running(collector):
        await backups.delete("nightly")
        await wait_for(lambda: _none_left(runs), 20)


async def _at_most(runs: Any, count: int) -> Any:
    listed = (await runs.list()).items
    return listed if 0 < len(listed) <= count else None


async def _none_left(runs: Any) -> bool:
    return not (await runs.list()).items
