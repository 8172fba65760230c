"""caractrl and volume data against a real apiserver over a real etcd: drain's guard and moves with final backups,
`restart --move`, `backup` (and `--wait`, with the status written by hand as an agent would), `restore` with
unknown, ambiguous and known snapshot ids, `get snapshots` and `describe`."""

from __future__ import annotations

import asyncio

from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock, seconds, timestamp
from caravanserai.project import backups, lifecycle
from caravanserai.testing import builders
from caravanserai.testing.wait import wait_for

CLOCK = SystemClock()
MiB = 1024 * 1024
ID_A = "4f1c2a9b" + "a" * 56
ID_B = "4f1c2a9b" + "b" * 56
ID_C = "9ab01c3d" + "c" * 56


def project_with(name: str, *, backed_up: tuple[str, ...] = (), unprotected: tuple[str, ...] = ()) -> v1.Project:
    """A project whose volumes in `backed_up` go to repository `offsite` every 5m, and whose `unprotected` ones
    are Persistent without backup."""
    project = builders.project(name)
    for volume in backed_up:
        spec = project.spec.volumes.add(name=volume, type=v1.VOLUME_PERSISTENT)
        spec.backup.repository, spec.backup.every, spec.backup.keep.last = "offsite", "5m", 3
    for volume in unprotected:
        project.spec.volumes.add(name=volume, type=v1.VOLUME_PERSISTENT)
    return project


async def running_on(client: Client, project: v1.Project, node: str) -> v1.Project:
    """Create `project` and make it Running on `node`, as the scheduler and its agent would."""
    return await place(client, await client.projects.create(project), node)


async def place(client: Client, project: v1.Project, node: str) -> v1.Project:
    """Bind the stored Pending `project` to `node` and make it Running there."""
    p = await client.projects.update_status(lifecycle.bind(project, node, now=CLOCK.now()))
    return await client.projects.update_status(
        lifecycle.run(p, reason="ContainersRunning", message="up", now=CLOCK.now())
    )


async def ready_node(client: Client, name: str) -> None:
    node = await client.nodes.create(builders.node(name))
    await client.nodes.update_status(builders.node_status(node))


def record(id_: str, age: float, node: str = "n1") -> v1.SnapshotRecord:
    return v1.SnapshotRecord(
        id=id_, time=timestamp(CLOCK.now() - age), node=node, size_bytes=64 * MiB, bytes_added=MiB, duration_seconds=1.5
    )


async def with_snapshots(client: Client, name: str, volume: str, *records: v1.SnapshotRecord) -> v1.Project:
    """Record `records` (newest first) as the volume's snapshots, as an agent does after a backup."""
    project = await client.projects.get(name)
    status = backups.ensure_volume_status(project.status, volume)
    status.snapshots.extend(records)
    status.last_backup.CopyFrom(records[0])
    return await client.projects.update_status(project)


# ---- drain ----------------------------------------------------------------------------------------------------


async def test_drain_refuses_a_project_whose_persistent_volume_has_no_backup_and_writes_nothing(
    cli: Caractrl, client: Client
) -> None:
    await ready_node(client, "n1")
    await running_on(client, builders.project("plain"), "n1")
    await running_on(client, project_with("wiki", unprotected=("files", "uploads")), "n1")
    result = await cli("drain", "n1")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        "error: cannot drain node/n1: project/wiki (volumes files, uploads) would leave Persistent volume data behind "
        "on n1 (no backup configured); use --force to move them anyway (their data stays behind)\n"
    )
    assert not (await client.nodes.get("n1")).spec.unschedulable  # not even cordoned
    assert {p.status.phase for p in await client.projects.list()} == {v1.RUNNING}


async def test_drain_force_moves_it_and_says_the_data_stays_behind(cli: Caractrl, client: Client) -> None:
    await ready_node(client, "n1")
    await running_on(client, project_with("wiki", unprotected=("files",)), "n1")
    result = await cli("drain", "n1", "--force", "--no-wait")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "node/n1 cordoned",
        "project/wiki moving off node/n1; volume data stays behind on n1 (files: no backup)",
        "node/n1 drained",
    ]
    wiki = await client.projects.get("wiki")
    assert (wiki.status.phase, wiki.status.previous_node_ref, wiki.status.HasField("move")) == (v1.PENDING, "n1", False)


async def test_drain_of_a_backed_up_project_waits_for_the_final_backup_then_its_new_node(
    cli: Caractrl, client: Client
) -> None:
    await ready_node(client, "n1")
    await ready_node(client, "n2")
    await running_on(client, project_with("db", backed_up=("pg",)), "n1")

    async def agent_then_scheduler() -> v1.Project:  # n1's agent hands the final snapshot over; n2 takes it
        async def moving() -> v1.Project | None:
            p = await client.projects.get("db")
            return p if p.status.HasField("move") else None

        seen = await wait_for(moving, 10, message="status.move")
        await client.projects.update_status(lifecycle.finish_move(seen, handoff={"pg": ID_A}, now=CLOCK.now()))
        return await place(client, await client.projects.get("db"), "n2")

    helper = asyncio.create_task(agent_then_scheduler())
    result = await cli("drain", "n1", "--timeout", "90s")
    placed = await helper
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "node/n1 cordoned",
        "project/db moving off node/n1 (final backup of pg first)",
        "project/db running on node/n2",
        "node/n1 drained",
    ]
    status = backups.volume_status(placed.status, "pg")
    assert status is not None and status.handoff_snapshot == ID_A
    assert meta.get_condition(placed.status.conditions, v1.CONDITION_SCHEDULED) is not None


async def test_drain_of_a_backed_up_project_reports_it_failed_after_the_move(cli: Caractrl, client: Client) -> None:
    await ready_node(client, "n1")
    await ready_node(client, "n2")
    await running_on(client, project_with("db", backed_up=("pg",)), "n1")

    async def agent_then_scheduler() -> None:  # the final backup is handed over; n2 is bound, then fails it
        async def moving() -> v1.Project | None:
            p = await client.projects.get("db")
            return p if p.status.HasField("move") else None

        seen = await wait_for(moving, 10, message="status.move")
        await asyncio.sleep(1)  # still bound to n1 with its move: drain keeps waiting
        await client.projects.update_status(lifecycle.finish_move(seen, handoff={"pg": ID_A}, now=CLOCK.now()))
        bound = await client.projects.update_status(
            lifecycle.bind(await client.projects.get("db"), "n2", now=CLOCK.now())
        )
        await asyncio.sleep(1)
        await client.projects.update_status(
            lifecycle.fail(bound, reason="RestoreFailed", message="volume pg: repository unreachable", now=CLOCK.now())
        )

    helper = asyncio.create_task(agent_then_scheduler())
    result = await cli("drain", "n1", "--timeout", "90s")
    await helper
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "node/n1 cordoned",
        "project/db moving off node/n1 (final backup of pg first)",
    ]
    assert (
        result.stderr
        == "error: project/db failed: Failed on node/n2: RestoreFailed: volume pg: repository unreachable\n"
    )


async def test_drain_without_waiting_leaves_a_backed_up_project_bound_with_its_move(
    cli: Caractrl, client: Client
) -> None:
    await ready_node(client, "n1")
    await running_on(client, project_with("db", backed_up=("pg",)), "n1")
    now = CLOCK.now()
    result = await cli("drain", "n1", "--no-wait", "--timeout", "90s")
    assert result.stdout.splitlines()[1] == "project/db moving off node/n1 (final backup of pg first)"
    db = await client.projects.get("db")
    assert (db.status.phase, db.status.node_ref) == (v1.RUNNING, "n1")  # bound until its node hands over
    move = db.status.move
    assert (move.reason, move.node) == (lifecycle.REASON_NODE_DRAINED, "n1")
    assert abs(seconds(move.deadline) - (now + 90)) < 10
    again = await cli("drain", "n1", "--no-wait")  # a move under way is not asked again
    assert again.exit_code == 0 and (await client.projects.get("db")).status.move == move


# ---- restart --move -------------------------------------------------------------------------------------------


async def test_restart_move_moves_one_project_off_its_node(cli: Caractrl, client: Client) -> None:
    await ready_node(client, "n1")
    await running_on(client, builders.project("web"), "n1")
    await running_on(client, project_with("db", backed_up=("pg",)), "n1")
    await running_on(client, project_with("wiki", unprotected=("files",)), "n1")
    web = await cli("restart", "web", "--move", "--timeout", "2m")
    assert (web.exit_code, web.stdout) == (0, "project/web moving off node/n1\n")
    moved = await client.projects.get("web")
    phase = meta.get_condition(moved.status.conditions, v1.CONDITION_PHASE)
    assert (moved.status.phase, moved.status.previous_node_ref) == (v1.PENDING, "n1")
    assert phase is not None and phase.reason == lifecycle.REASON_RESTARTED
    db = await cli("restart", "project", "db", "--move")
    assert db.stdout == "project/db moving off node/n1 (final backup of pg first)\n"
    assert (await client.projects.get("db")).status.move.reason == lifecycle.REASON_RESTARTED
    refused = await cli("restart", "wiki", "--move")
    assert (refused.exit_code, refused.stderr) == (
        1,
        "error: cannot move project/wiki (volume files) off node/n1: its Persistent volume data would stay behind "
        "(no backup configured); use --force to move it anyway\n",
    )
    assert (await client.projects.get("wiki")).status.phase == v1.RUNNING
    forced = await cli("restart", "wiki", "--move", "--force")
    assert forced.stdout == "project/wiki moving off node/n1; volume data stays behind on n1 (files: no backup)\n"
    pending = await cli("restart", "web", "--move")
    assert (pending.exit_code, pending.stderr) == (
        1,
        "error: project/web is Pending: only a Scheduled or Running project can be moved off its node\n",
    )
    services = await cli("restart", "db", "pg", "--move")
    assert services.exit_code == 2 and "--move moves the whole project; it takes no SERVICE" in services.stderr


# ---- backup ---------------------------------------------------------------------------------------------------


async def test_backup_stamps_every_backed_up_volume_and_wait_prints_each_snapshot(
    cli: Caractrl, client: Client
) -> None:
    await running_on(client, project_with("db", backed_up=("pg", "wal"), unprotected=("tmp",)), "n1")
    asked = await cli("backup", "db")
    assert (asked.exit_code, asked.stdout) == (0, "project/db backup requested (pg, wal)\n")
    db = await client.projects.get("db")
    assert all(v.backup.HasField("requested_at") for v in db.spec.volumes[:2])
    assert not db.spec.volumes[2].HasField("backup")

    waiting = asyncio.create_task(cli("backup", "db", "--volume", "pg", "--wait", "--timeout", "20s"))

    async def stamped() -> v1.Project | None:  # the second request (the first one's stamp is older)
        p = await client.projects.get("db")
        return p if p.spec.volumes[0].backup.requested_at != db.spec.volumes[0].backup.requested_at else None

    fresh = await wait_for(stamped, 10, message="the new backup request")
    await asyncio.sleep(0.3)
    assert not waiting.done()
    status = backups.ensure_volume_status(fresh.status, "pg")  # what the agent writes after the backup
    status.last_backup.CopyFrom(record(ID_A, 0))
    status.backup_request_handled.CopyFrom(fresh.spec.volumes[0].backup.requested_at)
    await client.projects.update_status(fresh)
    result = await waiting
    assert (result.exit_code, result.stdout) == (
        0,
        "project/db backup requested (pg)\npg: snapshot 4f1c2a9b (1MiB added, 1.5s)\n",
    )


async def test_backup_wait_reports_the_error_the_agent_recorded(cli: Caractrl, client: Client) -> None:
    await running_on(client, project_with("db", backed_up=("pg",)), "n1")
    waiting = asyncio.create_task(cli("backup", "db", "--wait", "--timeout", "20s"))

    async def stamped() -> v1.Project | None:
        p = await client.projects.get("db")
        return p if p.spec.volumes[0].backup.HasField("requested_at") else None

    fresh = await wait_for(stamped, 10, message="the backup request")
    status = backups.ensure_volume_status(fresh.status, "pg")
    status.last_error = "repository rest:http://127.0.0.1:1/ is not initialised; set spec.initialize or run restic init"
    status.backup_request_handled.CopyFrom(fresh.spec.volumes[0].backup.requested_at)
    await client.projects.update_status(fresh)
    result = await waiting
    assert (result.exit_code, result.stdout) == (1, "project/db backup requested (pg)\n")
    assert result.stderr == f"error: pg: {status.last_error}\n"


async def test_backup_of_a_volume_without_backup_is_one_line_and_writes_nothing(cli: Caractrl, client: Client) -> None:
    await client.projects.create(project_with("db", backed_up=("pg",), unprotected=("tmp",)))
    result = await cli("backup", "db", "--volume", "tmp")
    assert (result.exit_code, result.stderr) == (
        1,
        "error: volume tmp of project db has no backup (Persistent, no backup.repository)\n",
    )
    unknown = await cli("backup", "db", "--volume", "cache")
    assert unknown.stderr == "error: project db has no volume cache (it has pg, tmp)\n"
    missing = await cli("backup", "nope")
    assert missing.stderr == 'Error from server (NotFound): projects "nope" not found\n'
    assert (await client.projects.get("db")).metadata.generation == 1
    timed_out = await cli("backup", "db", "--wait", "--timeout", "1s")
    assert (timed_out.exit_code, timed_out.stderr) == (
        1,
        "error: timed out waiting for the backup of pg (project/db: its node has not handled the request)\n",
    )


# ---- restore and snapshots ------------------------------------------------------------------------------------


async def test_restore_checks_the_snapshot_id_then_stamps_the_full_one(cli: Caractrl, client: Client) -> None:
    await running_on(client, project_with("db", backed_up=("pg",), unprotected=("tmp",)), "n1")
    await with_snapshots(client, "db", "pg", record(ID_A, 60), record(ID_B, 360), record(ID_C, 660, "n2"))
    for snapshot, message in (
        ("deadbeef", "error: volume pg has no snapshot deadbeef (see caractrl get snapshots)"),
        ("4f1c2a9b", "error: snapshot 4f1c2a9b of volume pg is ambiguous (4f1c2a9b, 4f1c2a9b): give more digits"),
        ("4f1c", "error: snapshot '4f1c': give a snapshot id or at least 8 of its hex digits"),
    ):
        refused = await cli("restore", "db", "--volume", "pg", "--snapshot", snapshot)
        assert (refused.exit_code, refused.stderr) == (1, message + "\n")
    no_backup = await cli("restore", "db", "--volume", "tmp", "--snapshot", "9ab01c3d")
    assert no_backup.stderr == "error: volume tmp of project db has no backup (Persistent, no backup.repository)\n"
    assert (await client.projects.get("db")).metadata.generation == 1  # nothing written
    done = await cli("restore", "db", "--volume", "pg", "--snapshot", "9AB01C3D")
    assert (done.exit_code, done.stdout) == (0, "project/db restore of volume pg from snapshot 9ab01c3d requested\n")
    request = (await client.projects.get("db")).spec.volumes[0].restore_request
    assert request.snapshot == ID_C and abs(seconds(request.requested_at) - CLOCK.now()) < 10


async def test_restore_wait_waits_for_the_handled_stamp(cli: Caractrl, client: Client) -> None:
    await running_on(client, project_with("db", backed_up=("pg",)), "n1")
    await with_snapshots(client, "db", "pg", record(ID_A, 60), record(ID_C, 660, "n2"))
    waiting = asyncio.create_task(cli("restore", "db", "--volume", "pg", "--snapshot", ID_C, "--wait"))

    async def stamped() -> v1.Project | None:
        p = await client.projects.get("db")
        return p if p.spec.volumes[0].HasField("restore_request") else None

    fresh = await wait_for(stamped, 10, message="the restore request")
    status = backups.ensure_volume_status(fresh.status, "pg")
    status.restored.snapshot.CopyFrom(record(ID_C, 660, "n2"))
    status.restore_request_handled.CopyFrom(fresh.spec.volumes[0].restore_request.requested_at)
    await client.projects.update_status(fresh)
    result = await waiting
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "project/db restore of volume pg from snapshot 9ab01c3d requested",
        "pg: restored snapshot 9ab01c3d taken 11m ago on n2",
    ]


async def test_get_snapshots_lists_a_projects_snapshots(cli: Caractrl, client: Client) -> None:
    await running_on(client, project_with("db", backed_up=("pg",)), "n1")
    await with_snapshots(client, "db", "pg", record(ID_A, 60), record(ID_C, 660, "n2"))
    table = await cli("get", "snapshots", "db")
    assert table.stdout.splitlines() == [
        "ID         TIME   VOLUME   NODE   SIZE",
        "4f1c2a9b   60s    pg       n1     64MiB",
        "9ab01c3d   11m    pg       n2     64MiB",
    ]
    names = await cli("get", "snapshot", "db", "-o", "name")
    assert names.stdout == f"snapshot/{ID_A}\nsnapshot/{ID_C}\n"
    every = await cli("get", "snapshots", "--no-headers")
    assert every.stdout.splitlines()[0].split()[:2] == ["db", "4f1c2a9b"]
    missing = await cli("get", "snapshots", "nope")
    assert (missing.exit_code, missing.stderr) == (1, 'Error from server (NotFound): projects "nope" not found\n')
    refused = await cli("get", "snapshots", "db", "-w")
    assert refused.exit_code == 2 and "get snapshots takes PROJECT names" in refused.stderr
    await client.projects.create(builders.project("plain"))
    empty = await cli("get", "snapshots", "plain")
    assert (empty.stdout, empty.stderr) == ("", "No snapshots found.\n")


async def test_get_volumes_lists_persistent_volumes_where_their_data_lives(cli: Caractrl, client: Client) -> None:
    await running_on(client, project_with("db", backed_up=("pg",), unprotected=("tmp",)), "n1")
    db = await with_snapshots(client, "db", "pg", record(ID_A, 60))
    backups.ensure_volume_status(db.status, "pg").node = "n1"
    await client.projects.update_status(db)
    wiki = await running_on(client, project_with("wiki", unprotected=("files",)), "n2")
    now = CLOCK.now()  # drained with --force: the data of files stays behind on n2
    await client.projects.update_status(
        lifecycle.move(wiki, reason="NodeDrained", message="drained", now=now, handoff_until=now + 60)
    )
    await client.projects.create(project_with("fresh", unprotected=("cache",)))  # never ran: no node
    await client.projects.create(builders.project("plain"))  # no Persistent volume: no row
    table = await cli("get", "volumes")
    assert table.stdout.splitlines() == [
        "PROJECT   VOLUME   NODE     BACKUP       SIZE",
        "db        pg       n1       offsite/5m   64MiB",
        "db        tmp      n1       no           <unknown>",
        "fresh     cache    <none>   no           <unknown>",
        "wiki      files    n2       no           <unknown>",
    ]
    names = await cli("get", "volumes", "db", "-o", "name")
    assert names.stdout == "volume/db/pg\nvolume/db/tmp\n"
    wide = await cli("get", "volume", "wiki", "-o", "wide")
    assert "cara_wiki_files_n2" in wide.stdout and "Pending" in wide.stdout
    empty = await cli("get", "volumes", "plain")
    assert (empty.stdout, empty.stderr) == ("", "No Persistent volumes found.\n")
    refused = await cli("get", "volumes", "-l", "a=b")
    assert refused.exit_code == 2 and "get volumes takes PROJECT names" in refused.stderr
    await client.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name="team-a")))
    theirs = project_with("db", unprotected=("data",))
    theirs.metadata.namespace = "team-a"
    await client.projects.create(theirs)
    every = await cli("-A", "get", "volumes")
    assert [line.split() for line in every.stdout.splitlines()][:3] == [
        ["NAMESPACE", "PROJECT", "VOLUME", "NODE", "BACKUP", "SIZE"],
        ["default", "db", "pg", "n1", "offsite/5m", "64MiB"],
        ["default", "db", "tmp", "n1", "no", "<unknown>"],
    ]
    assert every.stdout.splitlines()[-1].split() == ["team-a", "db", "data", "<none>", "no", "<unknown>"]
    named = await cli("-A", "get", "volumes", "db")
    assert named.exit_code == 2 and "give -n NS instead of -A" in named.stderr


async def test_describe_shows_the_volumes_and_the_move(cli: Caractrl, client: Client) -> None:
    await running_on(client, project_with("db", backed_up=("pg",), unprotected=("tmp",)), "n1")
    project = await with_snapshots(client, "db", "pg", record(ID_A, 60))
    moved = lifecycle.move(
        project, reason="NodeDrained", message="draining", now=CLOCK.now(), handoff_until=CLOCK.now()
    )
    await client.projects.update_status(moved)
    text = (await cli("describe", "project", "db")).stdout
    assert "\nMove:                 NodeDrained off node n1, asked 0s ago: draining; the node stops" in text
    volumes = text[text.index("\nVolumes:\n") + 1 :].splitlines()
    assert volumes[1] == "  pg: last backup 60s ago (every 5m)"
    assert "    Last Snapshot:  4f1c2a9b taken 60s ago on n1: 64MiB (1MiB added in 1.5s)" in volumes
    assert "    Backup:  <none>: the data stays on its node when the project moves" in volumes
