"""restic's output read by the agent: errors classified into one clear line each (from restic 0.14's own stderr),
the JSON of backup, snapshots and stats, and the tags and records of snapshots."""

from __future__ import annotations

import pytest

from caravanserai import v1
from caravanserai.agent.volumes import resticerrors, resticjson, snapshots
from caravanserai.agent.volumes.resticerrors import classify, redact
from caravanserai.clock import seconds

URL = "rest:http://127.0.0.1:8000/repo/"

# stderr as restic 0.14 prints it for each fault (captured from real runs)
WRONG_PASSWORD = "Fatal: wrong password or no key found\n"
REFUSED = (
    'Fatal: unable to open config file: client.Head: Head "http://127.0.0.1:1/config": dial tcp 127.0.0.1:1: '
    "connect: connection refused\nIs there a repository at the following location?\nrest:http://127.0.0.1:1/\n"
)
MISSING_LOCAL = (
    "Fatal: unable to open config file: stat /srv/repo/config: no such file or directory\n"
    "Is there a repository at the following location?\n/srv/repo\n"
)
MISSING_REST = (
    "Fatal: unable to open config file: <config/> does not exist\nIs there a repository at the following "
    f"location?\n{URL}\n"
)
NO_SUCH_SNAPSHOT = 'invalid id "deadbeef": no matching ID found for prefix "deadbeef"\n'
DISK_FULL = "ignoring error for /blob: write /target/blob: no space left on device\nFatal: There were 1 errors\n"
LOCKED = (
    "unable to create lock in backend: repository is already locked exclusively by PID 42 on host-a by root "
    "(UID 0, GID 0)\nlock was created at 2026-12-02 03:40:00 (1s ago)\n"
)
EMPTY = "Fatal: unable to save snapshot: snapshot is empty\n"


@pytest.mark.parametrize(
    ("stderr", "url", "kind", "message"),
    [
        (
            WRONG_PASSWORD,
            URL,
            resticerrors.WRONG_PASSWORD,
            f"repository {URL}: wrong password (no key opens it with RESTIC_PASSWORD)",
        ),
        (
            REFUSED,
            "rest:http://127.0.0.1:1/",
            resticerrors.UNREACHABLE,
            "repository rest:http://127.0.0.1:1/ is unreachable: dial tcp 127.0.0.1:1: connect: connection refused",
        ),
        (
            MISSING_LOCAL,
            "/srv/repo",
            resticerrors.NOT_INITIALISED,
            "repository /srv/repo is not initialised; set spec.initialize or run restic init",
        ),
        (
            MISSING_REST,
            URL,
            resticerrors.NOT_INITIALISED,
            f"repository {URL} is not initialised; set spec.initialize or run restic init",
        ),
        (NO_SUCH_SNAPSHOT, URL, resticerrors.SNAPSHOT_NOT_FOUND, f"snapshot deadbeef not found in repository {URL}"),
        (DISK_FULL, URL, resticerrors.DISK_FULL, "restic restore: the disk is full (no space left on device)"),
        (EMPTY, URL, resticerrors.EMPTY, "restic restore: the volume is empty (restic saves no empty snapshot)"),
        (
            "Fatal: something new went wrong\n",
            URL,
            resticerrors.FAILED,
            "restic restore failed: something new went wrong",
        ),
        ("", URL, resticerrors.FAILED, "restic restore failed: no message"),
    ],
)
def test_each_fault_is_one_clear_line(stderr: str, url: str, kind: str, message: str) -> None:
    error = classify(stderr, url=url, action="restore")
    assert (error.kind, error.message) == (kind, message)
    assert "\n" not in error.message and str(error) == message


def test_a_locked_repository_names_the_holder() -> None:
    error = classify(LOCKED, url=URL, action="forget")
    assert error.kind == resticerrors.LOCKED
    assert error.message == (
        f"repository {URL} is locked by another restic: locked exclusively by PID 42 on host-a by root (UID 0, GID 0)"
    )


def test_a_wrong_password_is_never_taken_for_an_unreachable_repository() -> None:
    error = classify("dial tcp ok\n" + WRONG_PASSWORD, url=URL, action="backup")
    assert error.kind == resticerrors.WRONG_PASSWORD


def test_passwords_in_repository_urls_never_reach_a_message() -> None:
    url = "rest:https://backup:s3cret@backups.example.com:8000/repo/"
    assert redact(url) == "rest:https://backup:***@backups.example.com:8000/repo/"
    refused = REFUSED.replace("http://127.0.0.1:1", "https://backup:s3cret@backups.example.com:8000")
    for stderr in (WRONG_PASSWORD, MISSING_REST, refused, "Fatal: " + url + " broke\n"):
        assert "s3cret" not in classify(stderr, url=url, action="backup").message
    assert redact("/srv/backups") == "/srv/backups"


BACKUP_OUTPUT = (
    '{"message_type":"status","percent_done":0,"total_files":1,"total_bytes":6}\n'
    '{"message_type":"summary","files_new":2,"data_added":1048,"total_files_processed":2,'
    '"total_bytes_processed":8,"total_duration":0.210425709,"snapshot_id":"3fe14345"}\n'
)
SNAPSHOTS_OUTPUT = (
    '[{"time":"2026-12-02T03:38:39.840449042Z","tree":"04","paths":["/v/_data"],"hostname":"node-a",'
    '"tags":["caravanserai","project=u1","volume=data","node=node-a","epoch=node-a/0badcafe"],'
    '"id":"3fe143450a826c5218295c209bef3d89a2da801a43687ae9d981295a0901f9db","short_id":"3fe14345"},'
    '{"time":"2026-12-02T05:40:00+01:00","hostname":"node-b","tags":null,'
    '"id":"ac5fa2644e7ca48e662da0df66abdd37810e18bb9588703a6759ae0176a3be8f"}]\n'
)


def test_a_backup_summary_is_read_from_the_json_lines() -> None:
    summary = resticjson.backup_summary(BACKUP_OUTPUT)
    assert summary == resticjson.BackupSummary("3fe14345", 1048, 8, 0.210425709)
    with pytest.raises(ValueError, match="no summary"):
        resticjson.backup_summary('{"message_type":"status"}\nnot json\n')


def test_snapshots_are_listed_newest_first_with_their_tags() -> None:
    listed = resticjson.snapshots(SNAPSHOTS_OUTPUT)
    assert [s.short_id for s in listed] == ["ac5fa264", "3fe14345"]  # 04:40Z after 03:38Z
    older = listed[1]
    assert older.time == pytest.approx(1796182719.840449)
    assert (older.tag("node"), older.tag("epoch"), older.tag("missing")) == ("node-a", "node-a/0badcafe", "")
    assert listed[0].tags == () and listed[0].time == 1796186400.0  # 05:40+01:00 is 04:40Z
    assert resticjson.snapshots("[]\n") == []
    with pytest.raises(ValueError, match="no JSON list"):
        resticjson.snapshots("Fatal: nothing\n")
    with pytest.raises(ValueError, match="without id or time"):
        resticjson.snapshots('[{"id":"x"}]')


def test_times_and_restore_sizes() -> None:
    assert resticjson.parse_time("2026-12-02T04:38:39.5+01:00") == resticjson.parse_time("2026-12-02T03:38:39.5Z")
    with pytest.raises(ValueError, match="not RFC 3339"):
        resticjson.parse_time("yesterday")
    assert resticjson.restore_size('{"total_size":8,"total_file_count":3,"snapshots_count":1}\n') == 8
    with pytest.raises(ValueError, match="total_size"):
        resticjson.restore_size("{}")


def test_snapshot_tags_select_one_volume_of_one_project_incarnation() -> None:
    tags = snapshots.tags(project_uid="u1", volume="data", node="node-a", epoch="node-a/0badcafe")
    assert tags == ["caravanserai", "project=u1", "volume=data", "node=node-a", "epoch=node-a/0badcafe"]
    assert snapshots.selector(project_uid="u1", volume="data") == "project=u1,volume=data"
    keep = v1.BackupRetention(last=3, daily=7, monthly=0)
    assert snapshots.keep_flags(keep) == ["--keep-last=3", "--keep-daily=7"]


def test_records_keep_the_sizes_known_and_find_takes_unique_prefixes() -> None:
    listed = resticjson.snapshots(SNAPSHOTS_OUTPUT)
    known = v1.SnapshotRecord(id=listed[1].id, size_bytes=8, bytes_added=1048, duration_seconds=0.2, node="stale")
    records = snapshots.records(listed, [known])
    assert [(r.id[:8], r.node, r.epoch, r.size_bytes) for r in records] == [
        ("ac5fa264", "node-b", "", 0),  # no node tag: restic's host
        ("3fe14345", "node-a", "node-a/0badcafe", 8),
    ]
    assert seconds(records[1].time) == pytest.approx(listed[1].time) and records[1].bytes_added == 1048
    assert snapshots.find(listed, "3fe14345") is listed[1]
    assert snapshots.find(listed, listed[0].id) is listed[0]
    assert snapshots.find(listed, "") is None and snapshots.find(listed, "ffff") is None
    twins = [listed[1], resticjson.Snapshot("3fe14345" + "0" * 56, 0.0)]
    assert snapshots.find(twins, "3fe1") is None  # ambiguous
