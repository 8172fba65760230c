"""The Backup operator on the handler layer: every `spec.interval` seconds each Backup gets a BackupRun (owned by
it, so deleted with it), the newest `spec.keep` runs are kept, and the status counts the runs.

    python -m caravanserai.protoc --python_out=. backup.proto      # typed classes (or load_proto, as below)
    caractrl define --proto backup.proto --kind Backup --group ops.example.com     # by the deployment, once
    caractrl define --proto backup.proto --kind BackupRun --group ops.example.com
    python backup_operator.py --server 127.0.0.1:7420
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import pathlib
from typing import Any

from prometheus_client import Counter

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.controller import Manager
from caravanserai.customkinds.protoc import load_proto
from caravanserai.customkinds.schemas import register
from caravanserai.errors import AlreadyExists, NotFound
from caravanserai.operator import Context, Operator

GROUP = "ops.example.com"
RUN_LABEL = "ops.example.com/backup"
messages = load_proto(str(pathlib.Path(__file__).with_name("backup.proto")))
Backup, BackupRun = messages.Backup, messages.BackupRun
register(Backup, group=GROUP)
register(BackupRun, group=GROUP)


def build(client: Any, *, clock: Any = None, manager: Manager | None = None) -> Operator[Any]:
    """The Backup operator (added to `manager` when given; unit tests call `reconcile` on it directly)."""
    backups: Operator[Any] = Operator("backup", Backup, client, clock=clock)
    runs = client.resource(BackupRun)
    started = Counter("backup_runs_started_total", "BackupRuns created.", registry=manager and manager.registry)

    @backups.on_create()
    async def scheduled(ctx: Context[Any]) -> None:
        meta.set_condition(
            ctx.status.conditions,
            "Scheduled",
            v1.TRUE,
            reason="TimerStarted",
            message=f"a run every {ctx.obj.spec.interval}s",
            now=ctx.now,
        )

    @backups.timer(interval=lambda backup: backup.spec.interval, initial_delay=0.0)
    async def run(ctx: Context[Any]) -> None:
        number = ctx.status.runs + 1
        backup_run = meta.with_type_meta(BackupRun())
        backup_run.metadata.name = f"{ctx.name}-{number}"
        backup_run.metadata.labels[RUN_LABEL] = ctx.name
        backup_run.spec.backup, backup_run.spec.volume, backup_run.spec.number = ctx.name, ctx.obj.spec.volume, number
        with contextlib.suppress(AlreadyExists):  # created before a status write that failed
            await runs.create(ctx.own(backup_run))
        started.inc()
        ctx.status.runs, ctx.status.last_run = number, backup_run.metadata.name
        ctx.status.observed_generation = ctx.obj.metadata.generation
        await prune(ctx.name, keep=ctx.obj.spec.keep or 3)

    async def prune(name: str, *, keep: int) -> None:
        listed = await runs.list(label_selector=f"{RUN_LABEL}={name}")
        for old in sorted(listed.items, key=lambda r: r.spec.number)[:-keep]:
            with contextlib.suppress(NotFound):
                await runs.delete(old.metadata.name)

    if manager is not None:
        backups.setup(manager)
    return backups


async def _main(server: str | None, metrics_port: int) -> None:
    async with Client(server) as client:
        manager = Manager(client, metrics_port=metrics_port)
        build(client, manager=manager)
        manager.install_signal_handlers()
        await manager.run()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Run every Backup's BackupRuns on schedule.")
    parser.add_argument("--server", default=None, help="API address (default $CARA_SERVER or 127.0.0.1:7420)")
    parser.add_argument("--metrics-port", type=int, default=0, help="port of /metrics, /healthz, /readyz")
    args = parser.parse_args()
    asyncio.run(_main(args.server, args.metrics_port))
