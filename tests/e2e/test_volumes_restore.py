"""Restores before start and moves that hand the data over, on real Docker with real restic: two agents on one
engine (as the drain tests do), a REST repository served by `rclone serve restic` on loopback or a local-path
one. Backups are requested (`backup.requestedAt`), so every test runs within seconds."""

from __future__ import annotations

import asyncio
import pathlib
import secrets

import pytest
from agent_harness import NODE_LABEL, StartAgent, bind, docker, docker_list, wait_phase
from volume_harness import (
    COUNTER,
    add_repository,
    ask_move,
    back_up_now,
    backed_up,
    condition,
    events,
    exec_in,
    local_repository,
    read_volume,
    set_password,
    unbind,
    volume_label,
    volume_name,
    volume_status,
)

from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.client import Client
from caravanserai.client.apply import modify
from caravanserai.clock import SystemClock, seconds, timestamp
from caravanserai.testing.restic import ResticRepository, RestServer
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

EPOCH = "caravanserai.io/epoch"
SEEN_AT_START = "test -f /data/greeting && cp /data/greeting /data/seen-at-start; sleep 3600"


def cache(tmp_path: pathlib.Path) -> dict[str, str]:
    return {"restic_cache_dir": str(tmp_path / "restic-cache")}


async def move_to(client: Client, name: str, node: str) -> v1.Project:
    """Unbind the project (as node health does for a dead node) and bind it to `node`."""
    await unbind(client, name)
    return await bind(client, name, node)


async def rest_repository(client: Client, server: RestServer) -> ResticRepository:
    password = secrets.token_hex(8)
    repository = ResticRepository(server.url, password)
    await repository.init()
    await add_repository(client, "offsite", server.url, password)
    return repository


async def test_a_project_bound_to_another_node_starts_on_its_restored_data(
    client: Client, start_agent: StartAgent, image: str, tmp_path: pathlib.Path, cara_rest_server: RestServer
) -> None:
    await rest_repository(client, cara_rest_server)
    first = await start_agent(**cache(tmp_path))
    await client.projects.create(backed_up("notes", image, "offsite", command=SEEN_AT_START))
    await bind(client, "notes", first.node)
    await wait_phase(client, "notes", v1.RUNNING)
    exec_in("notes", first.node, "echo hello > /data/greeting")
    backup = (await back_up_now(client, "notes")).last_backup
    second = await start_agent(**cache(tmp_path))
    await move_to(client, "notes", second.node)

    moved = await wait_phase(client, "notes", v1.RUNNING, timeout=40)
    assert exec_in("notes", second.node, "cat /data/seen-at-start") == "hello"  # there before the service started
    status = volume_status(moved)
    assert status is not None and status.restored.snapshot.id == backup.id
    assert status.message.startswith(f"restored snapshot {backup.id[:8]} taken ")
    assert status.message.endswith(f" ago on {first.node}")
    assert (status.node, status.epoch) == (second.node, volume_label("notes", second.node, EPOCH))
    assert status.restored.bytes_done == status.restored.bytes_total == 6 and status.restored.node == second.node
    assert not status.HasField("restoring") and status.epoch.startswith(second.node + "/")
    restoring = condition(moved, v1.CONDITION_RESTORING)
    assert restoring is not None and (restoring.status, restoring.reason) == (v1.FALSE, "Restored")
    assert [e.spec.message for e in await events(client, "notes", "Restored")] == [f"volume data: {status.message}"]

    async def rates() -> v1.Node | None:
        node = await client.nodes.get(second.node)
        return node if "offsite" in node.status.network.restore_rates and node.status.images else None

    node = await wait_for(rates, timeout=20, message="the restore rate and images in the node's status")
    assert any(image in i.names for i in node.status.images)

    async def stale_copy_removed() -> bool:
        return not docker("volume", "ls", "-q", "--filter", f"name={volume_name('notes', first.node)}")

    await wait_for(stale_copy_removed, timeout=20, message="the first node's stale copy removed")


async def test_a_failed_restore_keeps_the_services_from_starting_until_the_fault_is_fixed(
    client: Client, start_agent: StartAgent, image: str, tmp_path: pathlib.Path
) -> None:
    repository = await local_repository(tmp_path, "right")
    await add_repository(client, "local", repository.url, "right")
    first = await start_agent(**cache(tmp_path))
    await client.projects.create(backed_up("guarded", image, "local", command=SEEN_AT_START))
    await bind(client, "guarded", first.node)
    await wait_phase(client, "guarded", v1.RUNNING)
    exec_in("guarded", first.node, "echo precious > /data/greeting")
    await back_up_now(client, "guarded")
    await set_password(client, "local", "wrong")
    second = await start_agent(**cache(tmp_path))
    await move_to(client, "guarded", second.node)

    async def refused() -> v1.Project | None:
        current = await client.projects.get("guarded")
        found = condition(current, v1.CONDITION_RESTORE_FAILED)
        return current if found is not None and found.status == v1.TRUE else None

    waiting = await wait_for(refused, timeout=30, message="RestoreFailed")
    reason = f"repository {repository.url}: wrong password (no key opens it with RESTIC_PASSWORD)"
    found = condition(waiting, v1.CONDITION_RESTORE_FAILED)
    assert found is not None and found.message == f"volume data: {reason}"
    assert waiting.status.phase == v1.SCHEDULED
    status = volume_status(waiting)
    assert status is not None and status.last_error == reason and status.node == first.node
    warned = await events(client, "guarded", "RestoreFailed")
    assert warned and warned[0].spec.type == "Warning" and warned[0].spec.message == f"volume data: {reason}"
    await asyncio.sleep(2.0)  # retried with backoff meanwhile: still nothing starts on empty data
    assert not docker_list("container", f"{NODE_LABEL}={second.node}")

    await set_password(client, "local", "right")
    running = await wait_phase(client, "guarded", v1.RUNNING, timeout=40)
    assert exec_in("guarded", second.node, "cat /data/seen-at-start") == "precious"
    cleared = condition(running, v1.CONDITION_RESTORE_FAILED)
    assert cleared is not None and cleared.status == v1.FALSE
    status = volume_status(running)
    assert status is not None and not status.last_error and status.node == second.node


async def test_restore_never_starts_on_an_empty_volume(
    client: Client, start_agent: StartAgent, image: str, tmp_path: pathlib.Path
) -> None:
    password = secrets.token_hex(8)
    repository = await local_repository(tmp_path, password)
    await add_repository(client, "local", repository.url, password)
    first = await start_agent(**cache(tmp_path))
    await client.projects.create(backed_up("scratch", image, "local", restore=v1.RESTORE_NEVER, command=SEEN_AT_START))
    await bind(client, "scratch", first.node)
    await wait_phase(client, "scratch", v1.RUNNING)
    exec_in("scratch", first.node, "echo old > /data/greeting")
    await back_up_now(client, "scratch")
    second = await start_agent(**cache(tmp_path))
    await move_to(client, "scratch", second.node)

    started = await wait_phase(client, "scratch", v1.RUNNING, timeout=30)
    assert exec_in("scratch", second.node, "ls -A /data") == ""
    status = volume_status(started)
    assert status is not None and status.message == "started empty: restore is Never"
    assert status.node == second.node and not status.HasField("restored")


async def test_a_move_hands_the_final_snapshot_over_and_the_counter_loses_no_write(
    client: Client, start_agent: StartAgent, image: str, tmp_path: pathlib.Path, cara_rest_server: RestServer
) -> None:
    await rest_repository(client, cara_rest_server)
    first = await start_agent(**cache(tmp_path))
    second = await start_agent(**cache(tmp_path))
    await client.projects.create(backed_up("counter", image, "offsite", command=COUNTER))
    await bind(client, "counter", first.node)
    await wait_phase(client, "counter", v1.RUNNING)
    await wait_for(lambda: int(read_volume("counter", first.node, "n") or 0) >= 5, timeout=10, message="counting")

    await ask_move(client, "counter")
    pending = await wait_phase(client, "counter", v1.PENDING, timeout=30)
    status = volume_status(pending)
    assert status is not None and len(status.handoff_snapshot) == 64
    assert status.last_backup.id == status.handoff_snapshot and not pending.status.HasField("move")
    last_written = int(read_volume("counter", first.node, "n"))
    final = await events(client, "counter", "BackupTaken")
    assert f"volume data: final snapshot {status.handoff_snapshot[:8]} before the move" in [
        e.spec.message for e in final
    ]

    await bind(client, "counter", second.node)
    moved = await wait_phase(client, "counter", v1.RUNNING, timeout=40)
    restored = volume_status(moved)
    assert restored is not None and restored.restored.snapshot.id == status.handoff_snapshot
    assert not restored.handoff_snapshot
    assert exec_in("counter", second.node, "cat /data/start") == f"start={last_written}"  # not one write lost
    await wait_for(lambda: int(read_volume("counter", second.node, "n") or 0) > last_written, timeout=10)


async def test_an_agent_killed_mid_restore_never_uses_the_half_restored_copy(
    client: Client, start_agent: StartAgent, image: str, tmp_path: pathlib.Path
) -> None:
    password = secrets.token_hex(8)
    repository = await local_repository(tmp_path, password)
    await add_repository(client, "local", repository.url, password)
    first = await start_agent(**cache(tmp_path))
    await client.projects.create(backed_up("bulky", image, "local"))
    await bind(client, "bulky", first.node)
    await wait_phase(client, "bulky", v1.RUNNING)
    exec_in(
        "bulky",
        first.node,
        "dd if=/dev/urandom of=/data/blob bs=1M count=200 2>/dev/null; md5sum /data/blob > /data/sum",
    )
    await back_up_now(client, "bulky")
    second = await start_agent(**cache(tmp_path))
    await move_to(client, "bulky", second.node)

    async def restoring() -> v1.Project | None:
        current = await client.projects.get("bulky")
        found = condition(current, v1.CONDITION_RESTORING)
        return current if found is not None and found.status == v1.TRUE else None

    midway = await wait_for(restoring, timeout=30, interval=0.05, message="a restore in progress")
    await second.stop()  # as a SIGKILL would: the restore stops half-way
    half = volume_label("bulky", second.node, EPOCH)
    status = volume_status(await client.projects.get("bulky"))
    assert half and status is not None and status.epoch != half and status.node == first.node
    assert volume_status(midway) is not None

    again = await start_agent(node=second.node, **cache(tmp_path))
    running = await wait_phase(client, "bulky", v1.RUNNING, timeout=60)
    status = volume_status(running)
    assert status is not None and status.node == again.node and status.epoch != half
    assert status.epoch == volume_label("bulky", again.node, EPOCH)
    assert exec_in("bulky", again.node, "md5sum -c /data/sum") == "/data/blob: OK"


async def test_a_node_that_comes_back_never_serves_its_stale_copy(
    client: Client, start_agent: StartAgent, image: str, tmp_path: pathlib.Path
) -> None:
    password = secrets.token_hex(8)
    repository = await local_repository(tmp_path, password)
    await add_repository(client, "local", repository.url, password)
    first = await start_agent(**cache(tmp_path))
    await client.projects.create(backed_up("returning", image, "local"))
    await bind(client, "returning", first.node)
    await wait_phase(client, "returning", v1.RUNNING)
    exec_in("returning", first.node, "echo 342 > /data/count")
    await back_up_now(client, "returning")
    await first.stop()  # the first node dies with its copy (342) on disk
    second = await start_agent(**cache(tmp_path))
    await move_to(client, "returning", second.node)
    await wait_phase(client, "returning", v1.RUNNING, timeout=30)
    exec_in("returning", second.node, "echo 675 > /data/count")
    await back_up_now(client, "returning")
    await second.stop()

    back = await start_agent(node=first.node, **cache(tmp_path))
    assert read_volume("returning", back.node, "count") == "342"  # the stale copy is still there ...
    await move_to(client, "returning", back.node)
    await wait_phase(client, "returning", v1.RUNNING, timeout=30)
    assert exec_in("returning", back.node, "cat /data/count") == "675"  # ... and never served

    await start_agent(node=second.node, **cache(tmp_path))  # the other node returns: its copy is stale now

    async def removed() -> bool:
        return not docker("volume", "ls", "-q", "--filter", f"name={volume_name('returning', second.node)}")

    await wait_for(removed, timeout=20, message="the returning node's stale copy removed")


async def test_a_restore_request_makes_a_new_copy_from_an_older_snapshot(
    client: Client, start_agent: StartAgent, image: str, tmp_path: pathlib.Path
) -> None:
    password = secrets.token_hex(8)
    repository = await local_repository(tmp_path, password)
    await add_repository(client, "local", repository.url, password)
    agent = await start_agent(**cache(tmp_path))
    await client.projects.create(backed_up("rewind", image, "local"))
    await bind(client, "rewind", agent.node)
    await wait_phase(client, "rewind", v1.RUNNING)
    exec_in("rewind", agent.node, "echo v1 > /data/v")
    older = (await back_up_now(client, "rewind")).last_backup
    exec_in("rewind", agent.node, "echo v2 > /data/v")
    before = await back_up_now(client, "rewind")

    handled = await request_restore(client, "rewind", older.id[:8])
    assert not handled.last_error and handled.restored.snapshot.id == older.id
    assert handled.epoch != before.epoch and handled.epoch == volume_label("rewind", agent.node, EPOCH)
    await wait_phase(client, "rewind", v1.RUNNING)
    await wait_for(lambda: _reads(agent.node, "v1"), timeout=20, message="the service again, on the older data")

    refused = await request_restore(client, "rewind", "deadbeef")
    assert refused.last_error == f"snapshot deadbeef not found in repository {repository.url}"
    assert refused.epoch == handled.epoch and exec_in("rewind", agent.node, "cat /data/v") == "v1"
    warned = [e.spec.message for e in await events(client, "rewind", "RestoreFailed")]
    assert warned == [f"volume data: {refused.last_error}"]

    await set_password(client, "local", "wrong")  # the repository cannot be read: the request fails, nothing else
    container = docker("inspect", "-f", "{{.Id}}", naming.container_name("rewind", "app", agent.node))
    unread = await request_restore(client, "rewind", before.last_backup.id)
    assert unread.last_error == f"repository {repository.url}: wrong password (no key opens it with RESTIC_PASSWORD)"
    assert unread.epoch == handled.epoch
    assert docker("inspect", "-f", "{{.Id}} {{.State.Running}}", container) == f"{container} true"
    failed = condition(await client.projects.get("rewind"), v1.CONDITION_RESTORE_FAILED)
    assert failed is None or failed.status == v1.FALSE  # the copy in use is fine


def _reads(node: str, value: str) -> bool:
    try:
        return exec_in("rewind", node, "cat /data/v") == value
    except RuntimeError:  # the container is being made again
        return False


async def request_restore(client: Client, name: str, snapshot: str) -> v1.VolumeStatus:
    """Stamp `restoreRequest` (as `caractrl restore` does) and wait until it was handled."""
    now = SystemClock().now()

    def stamp(p: v1.Project) -> bool:
        p.spec.volumes[0].restore_request.snapshot = snapshot
        p.spec.volumes[0].restore_request.requested_at.CopyFrom(timestamp(now))
        return True

    await modify(client.projects, name, stamp)

    async def handled() -> v1.VolumeStatus | None:
        status = volume_status(await client.projects.get(name))
        return status if status is not None and seconds(status.restore_request_handled) >= now - 1e-6 else None

    return await wait_for(handled, timeout=30, message=f"restore request {snapshot} handled")


async def test_a_move_whose_final_backup_fails_goes_on_without_it_past_the_deadline(
    client: Client, start_agent: StartAgent, image: str, tmp_path: pathlib.Path
) -> None:
    repository = await local_repository(tmp_path, "right")
    await add_repository(client, "local", repository.url, "right")
    agent = await start_agent(**cache(tmp_path))
    await client.projects.create(backed_up("stuck", image, "local", command="echo 1 > /data/f; sleep 3600"))
    await bind(client, "stuck", agent.node)
    await wait_phase(client, "stuck", v1.RUNNING)
    await back_up_now(client, "stuck")
    await set_password(client, "local", "wrong")

    asked = SystemClock().now()
    await ask_move(client, "stuck", deadline=4.0)
    pending = await wait_phase(client, "stuck", v1.PENDING, timeout=30)
    assert SystemClock().now() - asked >= 4.0  # retried until the deadline
    reason = f"repository {repository.url}: wrong password (no key opens it with RESTIC_PASSWORD)"
    note = f"no final backup of volume data: {reason} (past the move's deadline: the newest snapshot is used)"
    phase = condition(pending, v1.CONDITION_PHASE)
    assert phase is not None and phase.message == f"drained by the test; {note}"
    status = volume_status(pending)
    assert status is not None and not status.handoff_snapshot
    messages = [e.spec.message for e in await events(client, "stuck", "BackupFailed")]
    assert f"final backup before the move: volume data: {reason}; retrying" in messages
    assert note in messages


async def test_a_volume_without_backup_says_its_data_stayed_behind(
    client: Client, start_agent: StartAgent, image: str, tmp_path: pathlib.Path
) -> None:
    first = await start_agent()
    p = backed_up("plain", image, "none", command="echo here > /data/f; sleep 3600")
    p.spec.volumes[0].ClearField("backup")
    await client.projects.create(p)
    await bind(client, "plain", first.node)
    running = await wait_phase(client, "plain", v1.RUNNING)
    status = volume_status(running)
    assert status is not None and (status.node, status.message) == (first.node, "")
    assert status.epoch == volume_label("plain", first.node, EPOCH)
    second = await start_agent()
    await move_to(client, "plain", second.node)

    moved = await wait_phase(client, "plain", v1.RUNNING, timeout=30)
    status = volume_status(moved)
    assert status is not None and status.message == f"volume data stays on {first.node}: no backup configured"
    assert status.node == second.node
    warned = await events(client, "plain", "VolumeDataLeftBehind")
    assert [(e.spec.type, e.spec.message) for e in warned] == [("Warning", f"volume data: {status.message}")]
    assert read_volume("plain", first.node, "f") == "here"  # left where it was, as before
