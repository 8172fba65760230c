"""Volume backups on real Docker with real restic: periodic and requested backups with their status, snapshots and
Events, and every bad input (a failing or hanging hook, a wrong password, a repository that is not initialised).
The services keep running throughout. Backups are requested (`backup.requestedAt`) except where the period itself
is tested (every 10s, the shortest the apiserver allows)."""

from __future__ import annotations

import pathlib
import secrets

import pytest
from agent_harness import StartAgent, bind, docker, wait_phase
from volume_harness import (
    VOLUME,
    add_repository,
    back_up_now,
    backed_up,
    backup_answered,
    condition,
    events,
    exec_in,
    local_repository,
    request_backup,
    set_password,
    volume_status,
)

from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.client import Client
from caravanserai.client.apply import modify
from caravanserai.clock import seconds
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker


def cache(tmp_path: pathlib.Path) -> dict[str, str]:
    """Agent settings keeping restic's cache in the test's directory."""
    return {"restic_cache_dir": str(tmp_path / "restic-cache")}


async def running(client: Client, name: str, node: str) -> None:
    await bind(client, name, node)
    await wait_phase(client, name, v1.RUNNING, timeout=30)


async def test_backups_are_taken_every_interval_with_status_snapshots_and_events(
    client: Client, start_agent: StartAgent, image: str, tmp_path: pathlib.Path
) -> None:
    password = secrets.token_hex(8)
    repository = await local_repository(tmp_path, password)
    await add_repository(client, "local", repository.url, password)
    agent = await start_agent(**cache(tmp_path))
    await client.projects.create(
        backed_up("ticker", image, "local", command="echo one > /data/f; sleep 3600", every="10s")
    )
    await running(client, "ticker", agent.node)

    async def two_snapshots() -> v1.VolumeStatus | None:
        status = volume_status(await client.projects.get("ticker"))
        return status if status is not None and len(status.snapshots) >= 2 else None

    status = await wait_for(two_snapshots, timeout=40, message="two periodic backups")
    first, second = status.snapshots[1], status.snapshots[0]  # newest first
    assert 8.0 <= seconds(second.time) - seconds(first.time) <= 14.0
    assert status.last_backup.id == second.id and len(second.id) == 64
    assert (second.node, second.epoch) == (agent.node, status.epoch) and status.epoch.startswith(agent.node + "/")
    assert second.size_bytes == 4 and second.duration_seconds > 0 and not status.last_error
    ticker = await client.projects.get("ticker")
    listed = await repository.snapshots(f"project={ticker.metadata.uid}", f"volume={VOLUME}")
    assert {s["id"] for s in listed} == {s.id for s in status.snapshots}
    assert set(listed[-1]["tags"]) == {
        "caravanserai",
        f"project={ticker.metadata.uid}",
        "volume=data",
        f"node={agent.node}",
        f"epoch={status.epoch}",
    }
    taken = await events(client, "ticker", "BackupTaken")
    assert taken and all(e.spec.type == "Normal" and e.spec.message.startswith("volume data: snapshot ") for e in taken)
    assert volume_label_of(ticker, agent.node) == status.epoch


def volume_label_of(p: v1.Project, node: str) -> str:
    name = naming.volume_name(p.metadata.name, VOLUME, node)
    return docker("volume", "inspect", "-f", '{{index .Labels "caravanserai.io/epoch"}}', name)


async def test_a_failing_or_hanging_before_hook_fails_the_backup_and_the_service_keeps_running(
    client: Client, start_agent: StartAgent, image: str, tmp_path: pathlib.Path
) -> None:
    password = secrets.token_hex(8)
    repository = await local_repository(tmp_path, password)
    await add_repository(client, "local", repository.url, password)
    agent = await start_agent(**cache(tmp_path))
    p = backed_up("hooked", image, "local")
    hook = p.spec.volumes[0].backup.before
    hook.service, hook.command[:] = "app", ["sh", "-c", "echo cannot dump >&2; exit 3"]
    await client.projects.create(p)
    await running(client, "hooked", agent.node)
    container = docker("inspect", "-f", "{{.Id}}", naming.container_name("hooked", "app", agent.node))

    failed = await backup_answered(client, "hooked", await request_backup(client, "hooked"))
    assert failed.last_error == "before hook in service app exited with 3: cannot dump"
    assert not failed.HasField("last_backup") and failed.HasField("last_error_time")
    reported = await wait_for(lambda: events(client, "hooked", "BackupFailed"), timeout=10)
    assert reported[0].spec.type == "Warning"
    assert reported[0].spec.message == "volume data: before hook in service app exited with 3: cannot dump"

    def hang(project: v1.Project) -> bool:
        hook = project.spec.volumes[0].backup.before
        hook.command[:], hook.timeout = ["sleep", "30"], "1s"
        return True

    await modify(client.projects, "hooked", hang)
    hung = await backup_answered(client, "hooked", await request_backup(client, "hooked"))
    assert hung.last_error == "before hook in service app did not finish within 1s"
    assert not await repository.snapshots()  # restic never ran
    after = await client.projects.get("hooked")
    assert after.status.phase == v1.RUNNING
    assert docker("inspect", "-f", "{{.Id}} {{.State.Running}}", container) == f"{container} true"

    def fix(project: v1.Project) -> bool:
        project.spec.volumes[0].backup.before.command[:] = ["sh", "-c", "echo dumped > /data/dump"]
        return True

    await modify(client.projects, "hooked", fix)
    fixed = await back_up_now(client, "hooked")
    assert fixed.last_backup.id and not fixed.last_error and not fixed.HasField("last_error_time")
    assert exec_in("hooked", agent.node, "cat /data/dump") == "dumped"


async def test_a_wrong_password_fails_every_backup_with_one_line_and_the_backups_become_overdue(
    client: Client, start_agent: StartAgent, image: str, tmp_path: pathlib.Path
) -> None:
    repository = await local_repository(tmp_path, "the-right-one")
    await add_repository(client, "local", repository.url, "the-right-one")
    agent = await start_agent(**cache(tmp_path))
    await client.projects.create(
        backed_up("locked", image, "local", command="echo x > /data/x; sleep 3600", every="10s")
    )
    await running(client, "locked", agent.node)
    await back_up_now(client, "locked")
    await set_password(client, "local", "a-wrong-one")

    async def overdue() -> v1.Project | None:
        current = await client.projects.get("locked")
        found = condition(current, v1.CONDITION_BACKUP_OVERDUE)
        return current if found is not None and found.status == v1.TRUE else None

    locked = await wait_for(overdue, timeout=40, message="BackupOverdue 10s + 10s after the last backup")
    status = volume_status(locked)
    assert status is not None
    assert status.last_error == f"repository {repository.url}: wrong password (no key opens it with RESTIC_PASSWORD)"
    found = condition(locked, v1.CONDITION_BACKUP_OVERDUE)
    assert found is not None and found.message.startswith("volume data: last backup ")
    assert found.message.endswith(" ago, every 10s")
    assert [e.spec.type for e in await events(client, "locked", "BackupOverdue")] == ["Warning"]
    failures = await events(client, "locked", "BackupFailed")
    assert failures and failures[0].spec.message == f"volume data: {status.last_error}"
    assert locked.status.phase == v1.RUNNING
    assert "a-wrong-one" not in str(locked) and "a-wrong-one" not in "".join(e.spec.message for e in failures)
    assert docker("inspect", "-f", "{{.State.Running}}", naming.container_name("locked", "app", agent.node)) == "true"

    await set_password(client, "local", "the-right-one")
    await back_up_now(client, "locked")
    cleared = condition(await client.projects.get("locked"), v1.CONDITION_BACKUP_OVERDUE)
    assert cleared is not None and (cleared.status, cleared.reason) == (v1.FALSE, "BackupTaken")


async def test_a_repository_that_is_not_initialised_is_initialised_only_when_allowed(
    client: Client, start_agent: StartAgent, image: str, tmp_path: pathlib.Path
) -> None:
    password = secrets.token_hex(8)
    repository = await local_repository(tmp_path, password, initialise=False)
    await add_repository(client, "fresh", repository.url, password)
    agent = await start_agent(**cache(tmp_path))
    await client.projects.create(backed_up("newbie", image, "fresh", command="echo x > /data/x; sleep 3600"))
    started = await wait_phase_after_bind(client, "newbie", agent.node)
    status = volume_status(started)
    assert status is not None and status.message == "first run: no snapshot yet"

    refused = await backup_answered(client, "newbie", await request_backup(client, "newbie"))
    assert refused.last_error == (
        f"repository {repository.url} is not initialised; set spec.initialize or run restic init"
    )
    assert not (tmp_path / "repo" / "config").exists()

    def allow(repo: v1.BackupRepository) -> bool:
        repo.spec.initialize = True
        return True

    await modify(client.resource(v1.BackupRepository), "fresh", allow)
    done = await back_up_now(client, "newbie")
    assert (tmp_path / "repo" / "config").exists()
    assert [s["id"] for s in await repository.snapshots()] == [done.last_backup.id]


async def wait_phase_after_bind(client: Client, name: str, node: str) -> v1.Project:
    await bind(client, name, node)
    return await wait_phase(client, name, v1.RUNNING, timeout=30)


SLOW_HOOK = "mkdir /data/.running || exit 9; date +%s >> /data/hook-starts; sleep 10; rmdir /data/.running"


async def test_backups_slower_than_every_run_back_to_back_never_overlapping_and_say_so(
    client: Client, start_agent: StartAgent, image: str, tmp_path: pathlib.Path
) -> None:
    password = secrets.token_hex(8)
    repository = await local_repository(tmp_path, password)
    await add_repository(client, "local", repository.url, password)
    agent = await start_agent(**cache(tmp_path))
    p = backed_up("slow", image, "local", every="10s")
    hook = p.spec.volumes[0].backup.before
    hook.service, hook.command[:], hook.timeout = "app", ["sh", "-c", SLOW_HOOK], "30s"
    await client.projects.create(p)
    await running(client, "slow", agent.node)
    await request_backup(client, "slow")

    slow = await wait_for(lambda: events(client, "slow", "BackupSlow"), timeout=20, message="BackupSlow")
    assert slow[0].spec.type == "Warning"
    assert slow[0].spec.message.startswith("a backup of data takes 1")  # 10s of hook and restic's part
    assert slow[0].spec.message.endswith("s, longer than every (10s); backups run back to back")

    async def two_runs() -> list[int] | None:
        starts = exec_in("slow", agent.node, "cat /data/hook-starts").split()
        return [int(s) for s in starts] if len(starts) >= 2 else None

    first, second = (await wait_for(two_runs, timeout=20, message="the second run, right after the first"))[:2]
    assert 10 <= second - first <= 13  # after the first ended (no overlap), not `every` after it ended
    status = volume_status(await client.projects.get("slow"))
    assert status is not None and not status.last_error  # the hook never found another run in progress
