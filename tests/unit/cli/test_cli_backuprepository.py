"""caractrl's view of BackupRepositories: the `get` row, the `describe` layout (with the projects that use the
repository) and the schema bits."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.cli.kinds import VIEWS, view_of
from caravanserai.cli.kinds.backuprepository import HEADERS, describe_repository, repository_row
from caravanserai.cli.tables import RowContext
from caravanserai.clock import timestamp

NOW = 1_900_000_000.0


def repository() -> v1.BackupRepository:
    obj = meta.with_type_meta(v1.BackupRepository())
    obj.metadata.name = "offsite"
    obj.metadata.creation_timestamp.CopyFrom(timestamp(NOW - 180))
    obj.metadata.labels["tier"] = "backups"
    obj.spec.url = "rest:http://127.0.0.1:8000/wiki"
    obj.spec.secret = "restic"
    obj.spec.initialize = True
    return obj


def project(name: str, node: str, **volumes: str) -> v1.Project:
    p = v1.Project(metadata=v1.ObjectMeta(name=name))
    p.status.node_ref = node
    for volume, repository in volumes.items():
        v = p.spec.volumes.add(name=volume, type=v1.VOLUME_PERSISTENT)
        v.backup.repository = repository
        v.backup.every = "5m"
    return p


def test_get_row() -> None:
    assert HEADERS == ("NAME", "URL", "SECRET", "INITIALIZE", "AGE")
    row = repository_row(repository(), RowContext(now=NOW), wide=False)
    assert row == ["offsite", "rest:http://127.0.0.1:8000/wiki", "restic", "true", "3m"]
    plain = repository()
    plain.spec.initialize = False
    assert repository_row(plain, RowContext(now=NOW), wide=True)[3] == "false"


def test_describe_shows_every_field_and_who_uses_it() -> None:
    users = [project("wiki", "node-a", data="offsite", media="offsite"), project("shop", "", db="offsite")]
    users.append(project("blog", "node-b", data="elsewhere"))
    text = describe_repository(repository(), [], NOW, projects=users)
    for expected in (
        "Name:",
        "offsite",
        "Kind:",
        "BackupRepository",
        "rest:http://127.0.0.1:8000/wiki",
        "Secret:",
        "restic",
        "Initialize:",
        "true: an agent runs restic init",
        "tier=backups",
        "Used By:",
        "Events:",
    ):
        assert expected in text, expected
    used = text.split("Used By:")[1].split("Events:")[0].splitlines()
    assert [line.split() for line in used if line.strip()] == [
        ["PROJECT", "VOLUMES", "EVERY", "NODE"],
        ["shop", "db", "5m", "<none>"],
        ["wiki", "data,media", "5m", "node-a"],
    ]
    assert "blog" not in text
    unknown = describe_repository(repository(), [], NOW, projects=None)
    assert "Used By: <unknown: projects cannot be read>" in unknown


def test_the_view_is_in_the_table_with_its_schema() -> None:
    view = view_of(meta.KINDS["backuprepositories"])
    assert VIEWS["backuprepositories"] is view and view.deletable
    assert view.schema is not None and view.schema.required["BackupRepositorySpec"] == ("url", "secret")
