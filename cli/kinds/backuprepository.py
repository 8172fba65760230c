"""BackupRepositories in caractrl: the `get` table, the `describe` layout (the repository, its Secret by name —
never a value — and the projects whose volumes back up into it) and the schema of a repository manifest.

    NAME URL SECRET INITIALIZE AGE
"""

from __future__ import annotations

from collections.abc import Sequence

from caravanserai import v1
from caravanserai.cli.kinds.base import KindView, SchemaBits
from caravanserai.cli.layout import Writer, metadata_fields, write_events
from caravanserai.cli.printers import age, or_none
from caravanserai.cli.tables import Columns, RowContext
from caravanserai.client import Client
from caravanserai.errors import Forbidden
from caravanserai.project import backups

HEADERS = ("NAME", "URL", "SECRET", "INITIALIZE", "AGE")


def repository_row(repository: v1.BackupRepository, ctx: RowContext, wide: bool) -> list[str]:
    """Name, URL, Secret name, whether agents may `restic init` it, age (wide: the same)."""
    spec = repository.spec
    return [
        repository.metadata.name,
        or_none(spec.url),
        or_none(spec.secret),
        "true" if spec.initialize else "false",
        age(repository.metadata.creation_timestamp, ctx.now),
    ]


def users(repository: str, projects: Sequence[v1.Project]) -> list[list[str]]:
    """Rows PROJECT, VOLUMES, EVERY, NODE of the projects whose backed-up volumes use `repository`, by name."""
    rows = []
    for project in sorted(projects, key=lambda p: p.metadata.name):
        volumes = [v for v in backups.backed_up(project.spec) if v.backup.repository == repository]
        if volumes:
            names = ",".join(v.name for v in volumes)
            every = ",".join(sorted({v.backup.every for v in volumes}))
            rows.append([project.metadata.name, names, every, or_none(project.status.node_ref)])
    return rows


def describe_repository(
    repository: v1.BackupRepository, events: Sequence[v1.Event], now: float, *, projects: Sequence[v1.Project] | None
) -> str:
    """URL, Secret, initialize, metadata, the projects using it (`projects` None: they could not be read), events."""
    spec = repository.spec
    out = Writer()
    initialize = "true: an agent runs restic init when the repository does not exist" if spec.initialize else "false"
    out.fields(
        [
            ("Name", repository.metadata.name),
            ("Kind", "BackupRepository"),
            ("URL", or_none(spec.url)),
            ("Secret", or_none(spec.secret)),
            ("Initialize", initialize),
            *metadata_fields(repository, now),
        ]
    )
    if projects is None:
        out.heading("Used By", value="<unknown: projects cannot be read>")
    else:
        out.heading("Used By")
        out.table(("PROJECT", "VOLUMES", "EVERY", "NODE"), users(repository.metadata.name, projects))
    write_events(out, events, now)
    return out.text()


async def describe(client: Client, repository: v1.BackupRepository, events: Sequence[v1.Event], now: float) -> str:
    try:
        projects: list[v1.Project] | None = list(await client.projects.list(namespace=repository.metadata.namespace))
    except Forbidden:
        projects = None
    return describe_repository(repository, events, now, projects=projects)


VIEW = KindView(
    "backuprepositories",
    Columns(HEADERS, HEADERS, repository_row),
    describe=describe,
    deletable=True,
    schema=SchemaBits(top_required=("spec",), required={"BackupRepositorySpec": ("url", "secret")}),
)

__all__ = ["HEADERS", "VIEW", "describe", "describe_repository", "repository_row", "users"]
