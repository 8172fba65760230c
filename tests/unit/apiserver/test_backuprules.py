"""The rules of a volume's backups and restores (`apiserver.kinds.project.backuprules`): a project using every
field passes; each table row breaks one rule and is refused with exactly one violation naming its field."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from caravanserai import v1
from caravanserai.apiserver.kinds import validate_object, validate_status
from caravanserai.errors import Invalid

Mutation = Callable[[v1.Project], object]


def backed_up_project() -> v1.Project:
    """A project with a backed-up Persistent volume using every field, a plain Persistent one and a scratch one."""
    project = v1.Project(api_version=v1.API_VERSION, kind="Project", metadata=v1.ObjectMeta(name="wiki"))
    web = project.spec.services.add(name="web", image="wiki:1")
    web.volume_mounts.add(name="data", mount_path="/data")
    project.spec.services.add(name="cron", image="cron:1")
    data = project.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT, restore=v1.RESTORE_NEVER)
    data.backup.repository = "offsite.example.com"
    data.backup.every = "5m"
    data.backup.keep.last = 3
    data.backup.keep.daily = 7
    data.backup.before.service = "web"
    data.backup.before.command.extend(["sh", "-c", "sync"])
    data.backup.before.timeout = "30s"
    data.backup.requested_at.FromJsonString("2030-01-01T00:00:00Z")
    data.restore_request.snapshot = "4f1c2a9b"
    data.restore_request.requested_at.FromJsonString("2030-01-01T00:01:00Z")
    project.spec.volumes.add(name="cache", type=v1.VOLUME_PERSISTENT, restore=v1.RESTORE_LATEST)
    project.spec.volumes.add(name="tmp")
    return project


def _data(p: v1.Project) -> v1.Volume:
    return p.spec.volumes[0]


def _set_backup_on(index: int) -> Mutation:
    def mutate(p: v1.Project) -> None:
        p.spec.volumes[index].backup.CopyFrom(_data(p).backup)

    return mutate


def _clear_keep(p: v1.Project) -> None:
    _data(p).backup.ClearField("keep")


def _backup_on_a_secret_volume(p: v1.Project) -> None:
    p.spec.volumes[2].type = v1.VOLUME_SECRET
    p.spec.volumes[2].secret = "creds"
    _set_backup_on(2)(p)


def _drop_backup(p: v1.Project) -> None:
    _data(p).ClearField("backup")


V = "spec.volumes[0]"
CASES: list[tuple[Mutation, str, str]] = [
    (_set_backup_on(2), "spec.volumes[2].backup", "backups are only for Persistent volumes"),
    (_backup_on_a_secret_volume, "spec.volumes[2].backup", "backups are only for Persistent volumes"),
    (lambda p: setattr(_data(p).backup, "repository", ""), f"{V}.backup.repository", "is required"),
    (
        lambda p: setattr(_data(p).backup, "repository", "Off Site"),
        f"{V}.backup.repository",
        "must be a lowercase DNS subdomain",
    ),
    (lambda p: setattr(_data(p).backup, "every", ""), f"{V}.backup.every", "is required"),
    (
        lambda p: setattr(_data(p).backup, "every", "often"),
        f"{V}.backup.every",
        'must be a duration such as 30s, 5m or 1h30m, not "often"',
    ),
    (lambda p: setattr(_data(p).backup, "every", "9s"), f"{V}.backup.every", 'must be at least 10s, not "9s"'),
    (lambda p: setattr(_data(p).backup, "every", "500ms"), f"{V}.backup.every", 'must be at least 10s, not "500ms"'),
    (lambda p: setattr(_data(p).backup, "every", "0"), f"{V}.backup.every", 'must be at least 10s, not "0"'),
    (lambda p: setattr(_data(p).backup, "every", "400d"), f"{V}.backup.every", 'must be at most 365d, not "400d"'),
    (lambda p: setattr(_data(p).backup, "every", "inf"), f"{V}.backup.every", 'must be at most 365d, not "inf"'),
    (lambda p: setattr(_data(p).backup, "every", "nan"), f"{V}.backup.every", 'must be at most 365d, not "nan"'),
    (lambda p: setattr(_data(p).backup.keep, "hourly", -1), f"{V}.backup.keep.hourly", "must not be negative, not -1"),
    (lambda p: setattr(_data(p).backup.keep, "monthly", -2), f"{V}.backup.keep.monthly", "must not be negative"),
    (
        _clear_keep,
        f"{V}.backup.keep",
        "keep at least one snapshot: set one of last, hourly, daily, weekly, monthly above 0",
    ),
    (
        lambda p: (_clear_keep(p), setattr(_data(p).backup.keep, "weekly", 0)),
        f"{V}.backup.keep",
        "keep at least one snapshot",
    ),
    (lambda p: setattr(_data(p).backup.before, "service", ""), f"{V}.backup.before.service", "is required"),
    (
        lambda p: setattr(_data(p).backup.before, "service", "db"),
        f"{V}.backup.before.service",
        'service "db" is not declared in spec.services',
    ),
    (
        lambda p: setattr(_data(p).backup.before, "service", "cron"),
        f"{V}.backup.before.service",
        'service "cron" does not mount volume "data"',
    ),
    (
        lambda p: _data(p).backup.before.ClearField("command"),
        f"{V}.backup.before.command",
        "is required: the command to run and its arguments",
    ),
    (
        lambda p: _data(p).backup.before.command.__setitem__(0, ""),
        f"{V}.backup.before.command[0]",
        "is required: the program to run",
    ),
    (
        lambda p: setattr(_data(p).backup.before, "timeout", "soon"),
        f"{V}.backup.before.timeout",
        'must be a duration such as 30s, 5m or 1h30m, not "soon"',
    ),
    (
        lambda p: setattr(_data(p).backup.before, "timeout", "0s"),
        f"{V}.backup.before.timeout",
        'must be above 0, not "0s"',
    ),
    (
        lambda p: setattr(_data(p).backup.before, "timeout", "1000d"),
        f"{V}.backup.before.timeout",
        'must be at most 365d, not "1000d"',
    ),
    (
        lambda p: setattr(_data(p), "restore", "Sometimes"),
        f"{V}.restore",
        'must be one of "Latest", "Never" (or empty for Latest), not "Sometimes"',
    ),
    (
        lambda p: setattr(p.spec.volumes[2], "restore", v1.RESTORE_NEVER),
        "spec.volumes[2].restore",
        "is only for Persistent volumes",
    ),
    (
        lambda p: setattr(p.spec.volumes[2], "restore", v1.RESTORE_LATEST),
        "spec.volumes[2].restore",
        "is only for Persistent volumes",
    ),
    (
        lambda p: setattr(_data(p).restore_request, "snapshot", ""),
        f"{V}.restoreRequest.snapshot",
        "is required",
    ),
    (
        lambda p: setattr(_data(p).restore_request, "snapshot", "4f1c2a9"),
        f"{V}.restoreRequest.snapshot",
        'must be 8 to 64 lowercase hex digits, not "4f1c2a9"',
    ),
    (
        lambda p: setattr(_data(p).restore_request, "snapshot", "4F1C2A9B"),
        f"{V}.restoreRequest.snapshot",
        "must be 8 to 64 lowercase hex digits",
    ),
    (
        lambda p: setattr(_data(p).restore_request, "snapshot", "4f1c2a9b\n"),
        f"{V}.restoreRequest.snapshot",
        "must be 8 to 64 lowercase hex digits",
    ),
    (
        lambda p: setattr(_data(p).restore_request, "snapshot", "a" * 65),
        f"{V}.restoreRequest.snapshot",
        "must be 8 to 64 lowercase hex digits",
    ),
    (
        lambda p: _data(p).restore_request.ClearField("requested_at"),
        f"{V}.restoreRequest.requestedAt",
        "is required with a snapshot: when the restore was asked for",
    ),
    (
        _drop_backup,
        f"{V}.restoreRequest",
        "needs a backup on the volume: only a backed-up volume has snapshots to restore",
    ),
]


def _rejects(project: v1.Project, path: str, message: str) -> None:
    with pytest.raises(Invalid) as info:
        validate_object("projects", project)
    violations = [(v.field, v.description) for v in info.value.violations]
    assert [field for field, _ in violations] == [path], violations
    assert message in violations[0][1], violations
    assert f"{path}: " in str(info.value)


def test_a_project_using_every_backup_field_passes() -> None:
    validate_object("projects", backed_up_project())


@pytest.mark.parametrize(
    ("value", "ok"),
    [("10s", True), ("10", True), ("1h30m", True), ("365d", True), ("9.999s", False), ("-5m", False)],
)
def test_every_bounds(value: str, ok: bool) -> None:
    project = backed_up_project()
    _data(project).backup.every = value
    if ok:
        validate_object("projects", project)
    else:
        _rejects(project, f"{V}.backup.every", "must be")


def test_optional_parts_may_be_left_out() -> None:
    """No hook, no timeout, no restore policy (empty reads as Latest), no restore request: all fine; a snapshot id
    of 64 hex digits too."""
    project = backed_up_project()
    data = _data(project)
    data.backup.before.ClearField("timeout")
    validate_object("projects", project)
    data.backup.ClearField("before")
    data.restore = ""
    data.restore_request.snapshot = "0123456789abcdef" * 4
    validate_object("projects", project)
    data.ClearField("restore_request")
    validate_object("projects", project)
    data.restore_request.SetInParent()  # present but empty: asks for nothing
    validate_object("projects", project)


@pytest.mark.parametrize(
    ("mutate", "path", "message"),
    [pytest.param(m, p, msg, id=f"{p}: {msg[:40]}") for m, p, msg in CASES],
)
def test_each_rule_names_its_field(mutate: Mutation, path: str, message: str) -> None:
    project = backed_up_project()
    mutate(project)
    _rejects(project, path, message)


def test_a_backup_on_a_scratch_volume_is_one_violation_however_wrong_its_fields() -> None:
    project = backed_up_project()
    project.spec.volumes[2].backup.every = "1s"  # only the type is reported: the fields mean nothing there
    _rejects(project, "spec.volumes[2].backup", "backups are only for Persistent volumes")


def test_every_violation_at_once() -> None:
    project = backed_up_project()
    data = _data(project)
    data.backup.repository = ""
    data.backup.every = "1s"
    data.backup.ClearField("keep")
    data.backup.before.service = "cron"
    data.restore = "Maybe"
    with pytest.raises(Invalid) as info:
        validate_object("projects", project)
    assert [v.field for v in info.value.violations] == [
        f"{V}.backup.repository",
        f"{V}.backup.every",
        f"{V}.backup.keep",
        f"{V}.backup.before.service",
        f"{V}.restore",
    ]


def test_status_volumes_are_named_once() -> None:
    project = backed_up_project()
    project.status.phase = v1.RUNNING
    project.status.volumes.add(name="data")
    validate_status("projects", project)
    project.status.volumes.add(name="")
    project.status.volumes.add(name="data")
    with pytest.raises(Invalid) as info:
        validate_status("projects", project)
    assert [(v.field, v.description) for v in info.value.violations] == [
        ("status.volumes[1].name", "is required"),
        ("status.volumes[2].name", 'duplicate volume name "data" (first at status.volumes[0].name)'),
    ]
