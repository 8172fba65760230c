"""The Backup operator (examples/backup-operator) on the FakeClient: no server and no hand-written fake."""

from __future__ import annotations

from typing import Any

from caravanserai import meta
from caravanserai.controller import Result
from caravanserai.testing import FakeClient, FakeClock
from support.examples import ROOT, backup_operator

ops = backup_operator()


def backup(name: str, *, interval: int, keep: int = 2) -> Any:
    obj = meta.with_type_meta(ops.Backup())
    obj.metadata.name = name
    obj.spec.volume, obj.spec.interval, obj.spec.keep = "data", interval, keep
    return obj


def run_names(runs: Any) -> list[str]:
    return sorted(r.metadata.name for r in runs)


async def test_every_interval_a_run_owned_by_the_backup(fake_client: FakeClient, fake_clock: FakeClock) -> None:
    operator = ops.build(fake_client, clock=fake_clock)
    backups, runs = fake_client.resource(ops.Backup), fake_client.resource(ops.BackupRun)
    created = await backups.create(backup("nightly", interval=60))
    assert await operator.reconcile("nightly") == Result(requeue_after=60.0)
    first = await runs.get("nightly-1")
    assert meta.controller_of(first).uid == created.metadata.uid
    assert (first.spec.backup, first.spec.volume, first.spec.number) == ("nightly", "data", 1)
    status = (await backups.get("nightly")).status
    assert (status.runs, status.last_run) == (1, "nightly-1")
    assert meta.get_condition(status.conditions, "Scheduled").status == "True"

    for _ in range(2):
        fake_clock.advance(60)
        await operator.reconcile("nightly")
    assert run_names(await runs.list()) == ["nightly-2", "nightly-3"]  # keep: 2
    assert (await backups.get("nightly")).status.runs == 3


async def test_an_interval_change_applies_from_the_next_run(fake_client: FakeClient, fake_clock: FakeClock) -> None:
    operator = ops.build(fake_client, clock=fake_clock)
    backups = fake_client.resource(ops.Backup)
    await backups.create(backup("hourly", interval=3600))
    await operator.reconcile("hourly")
    changed = await backups.get("hourly")
    changed.spec.interval = 10
    await backups.update(changed)
    fake_clock.advance(3600)
    assert await operator.reconcile("hourly") == Result(requeue_after=10.0)


async def test_deleting_the_backup_deletes_its_runs(fake_client: FakeClient, fake_clock: FakeClock) -> None:
    operator = ops.build(fake_client, clock=fake_clock)
    await fake_client.resource(ops.Backup).create(backup("weekly", interval=60))
    await operator.reconcile("weekly")
    await fake_client.resource(ops.Backup).delete("weekly")
    assert await operator.reconcile("weekly") == Result()
    assert run_names(await fake_client.resource(ops.BackupRun).list()) == []


def test_the_operator_is_under_100_lines_of_code() -> None:
    source = (ROOT / "examples" / "backup-operator" / "backup_operator.py").read_text(encoding="utf-8")
    code = [line for line in source.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert len(code) < 100, len(code)
