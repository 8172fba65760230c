"""Volume data in caractrl without a server: snapshot id matching, backup/restore targets and outcomes, the
describe layout of volumes, moves and placement, `get snapshots`, the drain guard and `restart` arguments."""

from __future__ import annotations

import json

import click
import pytest

from caravanserai import meta, v1
from caravanserai.cli.describe_node import images_summary, restore_rates_text
from caravanserai.cli.describe_project import describe_project
from caravanserai.cli.errors import CommandError
from caravanserai.cli.moves import moving_line, refuse_unprotected
from caravanserai.cli.restart import not_movable, parse_arguments
from caravanserai.cli.snapshots import render
from caravanserai.cli.volumelist import render as render_volumes
from caravanserai.client import nodeops, volumeops
from caravanserai.client.volumestatus import freshness, volume_readings
from caravanserai.clock import timestamp
from caravanserai.testing import builders

NOW = 1_800_000_000.0
MiB = 1024 * 1024
ID_A = "4f1c2a9b" + "0" * 56
ID_B = "4f1c2a9c" + "1" * 56
ID_C = "9ab01c3d" + "2" * 56


def snapshot(id_: str, age: float, *, node: str = "node-a", size: int = 1024 * MiB) -> v1.SnapshotRecord:
    return v1.SnapshotRecord(
        id=id_,
        time=timestamp(NOW - age),
        node=node,
        size_bytes=size,
        bytes_added=12 * MiB,
        duration_seconds=3.2,
        epoch=f"{node}/1a2b3c4d",
    )


def with_volumes(name: str = "wiki") -> v1.Project:
    """A Running project on node-a: `data` backed up every 5m, `files` Persistent without backup, `tmp`
    Ephemeral; `data` has three snapshots and was restored from the newest."""
    project = builders.project(name)
    data = project.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT)
    data.backup.repository, data.backup.every, data.backup.keep.last = "offsite", "5m", 7
    project.spec.volumes.add(name="files", type=v1.VOLUME_PERSISTENT)
    project.spec.volumes.add(name="tmp")
    project.status.phase, project.status.node_ref = v1.RUNNING, "node-a"
    status = project.status.volumes.add(name="data", epoch="node-a/1a2b3c4d", node="node-a")
    status.snapshots.extend([snapshot(ID_A, 120), snapshot(ID_B, 420), snapshot(ID_C, 720, node="node-b")])
    status.last_backup.CopyFrom(status.snapshots[0])
    status.message = "restored snapshot 9ab01c3d taken 3 min ago on node-b"
    project.status.volumes.add(name="files", node="node-a", message="volume data stays on node-a: no backup configured")
    return project


# ---- snapshot ids ---------------------------------------------------------------------------------------------


def test_a_snapshot_matches_by_full_id_or_unique_prefix_of_eight_hex_digits() -> None:
    snapshots = with_volumes().status.volumes[0].snapshots
    assert volumeops.match_snapshot(snapshots, ID_A, volume="data").id == ID_A
    assert volumeops.match_snapshot(snapshots, "9AB01C3D", volume="data").id == ID_C
    assert volumeops.match_snapshot(snapshots, "4f1c2a9b0", volume="data").id == ID_A


@pytest.mark.parametrize(
    ("wanted", "message"),
    [
        ("4f1c2a9", "snapshot '4f1c2a9': give a snapshot id or at least 8 of its hex digits"),
        ("zzzzzzzzzz", "snapshot 'zzzzzzzzzz': give a snapshot id or at least 8 of its hex digits"),
        ("deadbeef", "volume data has no snapshot deadbeef (see caractrl get snapshots)"),
    ],
)
def test_a_snapshot_id_that_is_short_not_hex_or_unknown_is_refused_naming_it(wanted: str, message: str) -> None:
    snapshots = with_volumes().status.volumes[0].snapshots
    with pytest.raises(ValueError) as err:
        volumeops.match_snapshot(snapshots, wanted, volume="data")
    assert str(err.value) == message


def test_an_ambiguous_prefix_names_the_candidates() -> None:
    snapshots = [snapshot("4f1c2a9b" + "0" * 56, 1), snapshot("4f1c2a9b" + "f" * 56, 2)]
    with pytest.raises(ValueError) as err:
        volumeops.match_snapshot(snapshots, "4f1c2a9b", volume="data")
    assert str(err.value) == "snapshot 4f1c2a9b of volume data is ambiguous (4f1c2a9b, 4f1c2a9b): give more digits"


# ---- backup targets and outcomes ------------------------------------------------------------------------------


def test_backup_targets_every_backed_up_volume_or_the_named_one() -> None:
    project = with_volumes()
    assert volumeops.backup_targets(project) == ["data"]
    assert volumeops.backup_targets(project, "data") == ["data"]
    with pytest.raises(ValueError, match=r"^volume files of project wiki has no backup \(Persistent, no backup"):
        volumeops.backup_targets(project, "files")
    with pytest.raises(ValueError, match=r"^project wiki has no volume cache \(it has data, files, tmp\)$"):
        volumeops.backup_targets(project, "cache")
    with pytest.raises(ValueError, match=r"^project plain has no volume with a backup"):
        volumeops.backup_targets(builders.project("plain"))


def test_a_backup_outcome_waits_for_the_handled_stamp_then_gives_the_snapshot_or_the_error() -> None:
    project = with_volumes()
    stamp = timestamp(NOW)
    assert volumeops.backup_outcome(project, "data", stamp) is None
    status = project.status.volumes[0]
    status.backup_request_handled.CopyFrom(timestamp(NOW - 1))
    assert volumeops.backup_outcome(project, "data", stamp) is None  # an older request
    status.backup_request_handled.CopyFrom(stamp)
    done = volumeops.backup_outcome(project, "data", stamp)
    assert done is not None and done.snapshot is not None and done.snapshot.id == ID_A and not done.error
    status.last_error = "Fatal: wrong password or no key found"
    assert volumeops.backup_outcome(project, "data", stamp) == volumeops.Outcome("data", error=status.last_error)


def test_a_restore_outcome_is_the_snapshot_restored_or_why_not() -> None:
    project = with_volumes()
    stamp = timestamp(NOW)
    status = project.status.volumes[0]
    assert volumeops.restore_outcome(project, "data", stamp, ID_B) is None
    status.restore_request_handled.CopyFrom(stamp)
    status.restored.snapshot.CopyFrom(snapshot(ID_B, 420))
    done = volumeops.restore_outcome(project, "data", stamp, ID_B)
    assert done is not None and done.snapshot is not None and done.snapshot.id == ID_B
    other = volumeops.restore_outcome(project, "data", stamp, ID_C)
    assert other == volumeops.Outcome("data", error="the volume's copy is not from snapshot 9ab01c3d")


# ---- readings and describe ------------------------------------------------------------------------------------


def test_freshness_says_the_last_backup_age_against_every_and_overdue_when_the_condition_holds() -> None:
    project = with_volumes()
    data = volume_readings(project, NOW)[0]
    assert freshness(data) == "last backup 2m ago (every 5m)"
    assert [r.name for r in volume_readings(project, NOW)] == ["data", "files"]  # tmp is Ephemeral, no status
    meta.set_condition(project.status.conditions, v1.CONDITION_BACKUP_OVERDUE, v1.TRUE, reason="x", message="", now=NOW)
    assert freshness(volume_readings(project, NOW)[0]) == "last backup 2m ago (every 5m)"  # not this one: 2m < 5m
    assert freshness(volume_readings(project, NOW + 600)[0]) == "last backup 12m ago (every 5m) OVERDUE"
    assert freshness(volume_readings(project, NOW)[1]) == ""  # no backup: nothing to be overdue


def test_describe_project_tells_the_story_of_its_volume_data() -> None:
    project = with_volumes()
    restoring = project.status.volumes[0].restoring
    restoring.snapshot.CopyFrom(snapshot(ID_A, 120))
    restoring.bytes_done, restoring.bytes_total, restoring.node = 512 * MiB, 1024 * MiB, "node-b"
    restoring.started_at.CopyFrom(timestamp(NOW - 5))
    text = describe_project(project, [], NOW)
    volumes = text[text.index("\nVolumes:\n") + 1 :]
    assert volumes.splitlines()[1:19] == [
        "  data: last backup 2m ago (every 5m)",
        "    Type:           Persistent",
        "    Backup:         repository offsite, every 5m",
        "    Keep:           last=7",
        "    Restore:        Latest (default)",
        "    Last Snapshot:  4f1c2a9b taken 2m ago on node-a: 1GiB (12MiB added in 3.2s), copy node-a/1a2b3c4d",
        "    Last Error:     <none>",
        "    Data:           restored snapshot 9ab01c3d taken 3 min ago on node-b",
        "    Copy:           node-a/1a2b3c4d on node-a",
        "    Restoring:      restoring 4f1c2a9b: 512MiB / 1GiB by node-b, started 5s ago",
        " " * 20 + "snapshot 4f1c2a9b taken 2m ago on node-a: 1GiB (12MiB added in 3.2s), copy node-a/1a2b3c4d",
        "    Snapshots: 3",
        "      ID         TIME   NODE     SIZE   ADDED   DURATION   COPY",
        "      4f1c2a9b   2m     node-a   1GiB   12MiB   3.2s       node-a/1a2b3c4d",
        "      4f1c2a9c   7m     node-a   1GiB   12MiB   3.2s       node-a/1a2b3c4d",
        "      9ab01c3d   12m    node-b   1GiB   12MiB   3.2s       node-b/1a2b3c4d",
        "  files:",
        "    Type:    Persistent",
    ]
    assert volumes.splitlines()[19:22] == [
        "    Backup:  <none>: the data stays on its node when the project moves",
        "    Data:    volume data stays on node-a: no backup configured",
        "    Copy:    <none> on node-a",
    ]
    assert "tmp:" not in volumes and "Placement:" not in text and "\nMove:" not in text


def test_describe_project_shows_a_move_and_the_placement_estimates() -> None:
    project = with_volumes()
    project.status.move.reason, project.status.move.node = "NodeDrained", "node-a"
    project.status.move.message = "Node node-a is being drained; placing the project elsewhere"
    project.status.move.requested_at.CopyFrom(timestamp(NOW - 10))
    project.status.move.deadline.CopyFrom(timestamp(NOW + 290))
    chosen = project.status.placement.chosen
    chosen.node, chosen.start_delay_seconds, chosen.image_bytes, chosen.restore_bytes = "node-b", 12.5, 0, 1024 * MiB
    chosen.download_rate, chosen.download_rate_source = 85 * MiB, "restores"
    chosen.rpo_bytes, chosen.upload_rate, chosen.rpo_feasible, chosen.score = 12 * MiB, 5 * MiB, True, 87.5
    project.status.placement.runner_up.node = "node-c"
    text = describe_project(project, [], NOW)
    move = next(line for line in text.splitlines() if line.startswith("Move:"))
    assert move.split(None, 1)[1] == (
        "NodeDrained off node node-a, asked 10s ago: Node node-a is being drained; placing the project elsewhere; "
        "the node stops the services and takes the final backups, at most until 2027-01-15T08:04:50Z"
    )
    placement = text[text.index("\nPlacement:\n") + 1 :].splitlines()[1:4]
    assert [line.split() for line in placement] == [
        [
            "ESTIMATE",
            "NODE",
            "START",
            "DELAY",
            "IMAGES",
            "RESTORE",
            "DOWNLOAD",
            "FROM",
            "RPO",
            "UPLOAD",
            "RPO",
            "FEASIBLE",
            "SCORE",
        ],
        ["chosen", "node-b", "12.5s", "0B", "1GiB", "85MiB/s", "restores", "12MiB", "5MiB/s", "yes", "87.5"],
        ["runner-up", "node-c", "0.0s", "0B", "0B", "0B/s", "<none>", "0B", "0B/s", "no", "0"],
    ]


def test_describe_node_sums_its_images_and_names_restore_rates() -> None:
    images = [v1.NodeImage(names=["busybox:1"], size_bytes=4 * MiB), v1.NodeImage(names=["pg:16"], size_bytes=MiB)]
    assert images_summary(images) == "2 (5MiB in all)"
    assert images_summary([]) == "0"
    assert restore_rates_text({"offsite": "85Mi", "local": "120Mi"}) == "local: 120Mi/s, offsite: 85Mi/s"


# ---- get snapshots --------------------------------------------------------------------------------------------


def test_get_snapshots_table_wide_json_and_name() -> None:
    project = with_volumes()
    project.metadata.namespace = "default"
    assert render([project], "table", NOW, with_project=False, no_headers=False) == [
        "ID         TIME   VOLUME   NODE     SIZE",
        "4f1c2a9b   2m     data     node-a   1GiB",
        "4f1c2a9c   7m     data     node-a   1GiB",
        "9ab01c3d   12m    data     node-b   1GiB",
    ]
    wide = render([project], "wide", NOW, with_project=True, no_headers=True)
    assert wide[0].split() == ["wiki", "4f1c2a9b", "2m", "data", "node-a", "1GiB", "12MiB", "3.2s", "node-a/1a2b3c4d"]
    listed = json.loads("\n".join(render([project], "json", NOW, with_project=False, no_headers=False)))
    assert listed["kind"] == "SnapshotList" and len(listed["items"]) == 3
    assert listed["items"][2] | {"time": "t"} == {
        "project": "wiki",
        "namespace": "default",
        "volume": "data",
        "id": ID_C,
        "time": "t",
        "node": "node-b",
        "sizeBytes": str(1024 * MiB),
        "bytesAdded": str(12 * MiB),
        "durationSeconds": 3.2,
        "epoch": "node-b/1a2b3c4d",
    }
    assert render([project], "name", NOW, with_project=False, no_headers=False)[0] == f"snapshot/{ID_A}"
    assert render([builders.project("plain")], "table", NOW, with_project=False, no_headers=False) == []


def test_get_snapshots_and_volumes_across_namespaces_put_the_namespace_first() -> None:
    ours, theirs = with_volumes(), with_volumes()
    ours.metadata.namespace, theirs.metadata.namespace = "default", "team-a"
    rows = render([ours, theirs], "table", NOW, with_project=True, no_headers=False, all_namespaces=True)
    assert rows[0].split() == ["NAMESPACE", "PROJECT", "ID", "TIME", "VOLUME", "NODE", "SIZE"]
    assert [r.split()[:3] for r in rows[1:]] == [
        *(["default", "wiki", short] for short in ("4f1c2a9b", "4f1c2a9c", "9ab01c3d")),
        *(["team-a", "wiki", short] for short in ("4f1c2a9b", "4f1c2a9c", "9ab01c3d")),
    ]
    volumes = render_volumes([ours, theirs], "table", no_headers=False, all_namespaces=True)
    assert [line.split() for line in volumes] == [
        ["NAMESPACE", "PROJECT", "VOLUME", "NODE", "BACKUP", "SIZE"],
        ["default", "wiki", "data", "node-a", "offsite/5m", "1GiB"],
        ["default", "wiki", "files", "node-a", "no", "<unknown>"],
        ["team-a", "wiki", "data", "node-a", "offsite/5m", "1GiB"],
        ["team-a", "wiki", "files", "node-a", "no", "<unknown>"],
    ]
    one_namespace = render_volumes([theirs], "table", no_headers=True)
    assert one_namespace[0].split()[:2] == ["team-a/wiki", "data"]
    items = json.loads("\n".join(render_volumes([theirs], "json", no_headers=False)))["items"]
    assert [(i["project"], i["namespace"], i["volume"]) for i in items] == [
        ("team-a/wiki", "team-a", "data"),
        ("team-a/wiki", "team-a", "files"),
    ]


# ---- moves ----------------------------------------------------------------------------------------------------


def test_drain_refuses_unprotected_volumes_in_one_line_naming_projects_and_volumes() -> None:
    plain, wiki = builders.project("plain"), with_volumes()
    assert nodeops.unprotected_volumes([plain, wiki]) == {"wiki": ["files"]}
    refuse_unprotected([plain], "node-a", force=False)  # nothing to leave behind
    refuse_unprotected([wiki], "node-a", force=True)  # forced
    with pytest.raises(CommandError) as err:
        refuse_unprotected([plain, wiki], "node-a", force=False)
    assert err.value.message == (
        "error: cannot drain node/node-a: project/wiki (volume files) would leave Persistent volume data behind on "
        "node-a (no backup configured); use --force to move them anyway (their data stays behind)"
    )
    with pytest.raises(CommandError, match=r"^error: cannot move project/wiki \(volume files\) off node/node-a"):
        refuse_unprotected([wiki], "node-a", force=False, action="move")


def test_the_moving_line_says_what_happens_to_the_data() -> None:
    assert moving_line(builders.project("plain"), "n1") == "project/plain moving off node/n1"
    assert moving_line(with_volumes(), "node-a") == (
        "project/wiki moving off node/node-a (final backup of data first); volume data stays behind on node-a "
        "(files: no backup)"
    )


def test_restart_takes_the_project_word_optionally() -> None:
    assert parse_arguments(["project", "web", "db"]) == ("web", ("db",))
    assert parse_arguments(["p/web"]) == ("web", ())
    assert parse_arguments(["web"]) == ("web", ())
    assert parse_arguments(["project", "project"]) == ("project", ())
    with pytest.raises(click.UsageError, match="missing the project NAME"):
        parse_arguments(["project"])
    with pytest.raises(click.UsageError, match="only projects can be restarted, not node/n1"):
        parse_arguments(["node/n1"])


def test_only_a_bound_project_not_being_deleted_can_be_moved() -> None:
    assert not_movable(with_volumes()) is None
    pending = builders.project("web")
    assert (
        not_movable(pending) == "project/web is Pending: only a Scheduled or Running project can be moved off its node"
    )
    deleting = with_volumes()
    deleting.metadata.deletion_timestamp.CopyFrom(timestamp(NOW))
    assert not_movable(deleting) == "project/wiki is being deleted; it is not moved"
