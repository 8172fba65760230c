"""`caractrl get volumes [PROJECT…]`: the Persistent volumes of projects and where their data lives.

    $ caractrl get volumes
    PROJECT   VOLUME   NODE     BACKUP          SIZE
    db        pg       node-a   offsite/5m      1.0GiB
    wiki      files    node-b   no              <unknown>

`volumes` is not a stored kind: it reads the named projects (every project when none is named). One row per
`Persistent` volume of their spec:

* NODE is where the data is: for a backed-up volume the node of its current copy (`status.volumes[].node`), else
  the project's node; for a volume without backup the node it is bound to, else the node a move left (the data
  stayed there: `status.previousNodeRef`), else `<none>` (never ran).
* BACKUP is `REPOSITORY/EVERY` or `no`; SIZE the size of the volume's last backup (`<unknown>` without one: the
  agent does not measure volumes).
* `-A/--all-namespaces` lists the projects of every namespace, a NAMESPACE column first (PROJECT is then the
  bare name); `-o json|yaml` items carry their `namespace` too.
* `-o wide` adds PHASE, the Docker volume's name (`cara_<project>_<volume>_<node>`) and the volume's status
  message; `-o json|yaml` prints a `VolumeList`; `-o name` prints `volume/<project>/<volume>`.

The volumes of a deleted project are no longer listed (the record is gone); `caractrl delete project NAME
--volumes` removes them with the project.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click

from caravanserai import meta, v1
from caravanserai.cli.common import run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import PartialFailure
from caravanserai.cli.printers import NONE, UNKNOWN, TableWriter, render_data
from caravanserai.cli.snapshots import named_projects
from caravanserai.client.volumestatus import size_text
from caravanserai.project import backups, nodenames

NAMES = ("volumes", "volume", "vol")
"""The words `get` takes for volumes."""
NO_VOLUMES = "No Persistent volumes found."
HEADERS = ("PROJECT", "VOLUME", "NODE", "BACKUP", "SIZE")
WIDE_HEADERS = (*HEADERS, "PHASE", "DOCKER-VOLUME", "MESSAGE")


def is_volumes(resource: str) -> bool:
    """Whether `get RESOURCE` asks for volumes."""
    return resource.lower() in NAMES


@dataclass(frozen=True, slots=True)
class VolumeRow:
    """One Persistent volume of a project and where its data lives (`node` "" when it never ran)."""

    project: str  # as shown: the name in `default`, "namespace/name" elsewhere (`meta.shown`)
    namespace: str
    name: str  # the project's own name
    volume: str
    node: str
    backup: str
    size_bytes: int | None
    phase: str
    message: str

    @property
    def docker_name(self) -> str:
        return nodenames.volume_name(self.project, self.volume, self.node) if self.node else ""


def volume_rows(project: v1.Project) -> list[VolumeRow]:
    """The rows of `project`'s Persistent volumes, in declaration order."""
    rows = []
    status = project.status
    for volume in project.spec.volumes:
        if volume.type != v1.VOLUME_PERSISTENT:
            continue
        recorded = backups.volume_status(status, volume.name)
        if volume.backup.repository:
            node = (recorded.node if recorded is not None else "") or status.node_ref
            backup = f"{volume.backup.repository}/{volume.backup.every}"
        else:
            node = status.node_ref or status.previous_node_ref or (recorded.node if recorded is not None else "")
            backup = "no"
        size = recorded.last_backup.size_bytes if recorded is not None and recorded.HasField("last_backup") else None
        message = recorded.message if recorded is not None else ""
        shown = meta.shown(meta.key_of(project))
        meta_ = project.metadata
        rows.append(
            VolumeRow(shown, meta_.namespace, meta_.name, volume.name, node, backup, size, status.phase, message)
        )
    return rows


def _cells(row: VolumeRow, *, wide: bool, all_namespaces: bool) -> list[str]:
    size = UNKNOWN if row.size_bytes is None else size_text(row.size_bytes)
    first = [row.namespace, row.name] if all_namespaces else [row.project]
    cells = [*first, row.volume, row.node or NONE, row.backup, size]
    if wide:
        cells += [row.phase or NONE, row.docker_name or NONE, row.message or NONE]
    return cells


def render(projects: Sequence[v1.Project], fmt: str, *, no_headers: bool, all_namespaces: bool = False) -> list[str]:
    """The lines `get volumes` prints in format `fmt` (table, wide, json, yaml, name); empty when a table has no
    rows. `all_namespaces`: a NAMESPACE column first, PROJECT the bare name."""
    rows = [row for project in projects for row in volume_rows(project)]
    if fmt in ("json", "yaml"):
        items: list[dict[str, Any]] = [
            {
                "project": row.project,
                "namespace": row.namespace,
                "volume": row.volume,
                "node": row.node,
                "backup": row.backup,
                "sizeBytes": row.size_bytes,
                "phase": row.phase,
                "dockerVolume": row.docker_name,
                "message": row.message,
            }
            for row in rows
        ]
        data = {"apiVersion": v1.API_VERSION, "kind": "VolumeList", "items": items}
        return [render_data(data, fmt).rstrip("\n")]
    if fmt == "name":
        return [f"volume/{row.project}/{row.volume}" for row in rows]
    if not rows:
        return []
    wide = fmt == "wide"
    headers = (["NAMESPACE"] if all_namespaces else []) + list(WIDE_HEADERS if wide else HEADERS)
    cells = [_cells(row, wide=wide, all_namespaces=all_namespaces) for row in rows]
    return TableWriter(headers, show_headers=not no_headers).lines(cells)


async def get_volumes(
    settings: Settings, names: Sequence[str], fmt: str, *, no_headers: bool, ignore_not_found: bool
) -> None:
    """Print the Persistent volumes of the named projects (all when none is named); exit 1 when one is missing."""
    projects, missing = await named_projects(settings, names, ignore_not_found)
    lines = render(projects, fmt, no_headers=no_headers, all_namespaces=settings.all_namespaces)
    for line in lines:
        click.echo(line)
    if not lines and fmt in ("table", "wide"):
        click.echo(NO_VOLUMES, err=True)
    if missing and not ignore_not_found:
        raise PartialFailure()


def volumes_command(
    settings: Settings, names: Sequence[str], output: str | None, *, refused: bool, no_headers: bool, missing_ok: bool
) -> None:
    """`get volumes`: a usage error when `refused` (selectors, --for or watching were given), else the listing."""
    if refused:
        raise click.UsageError("get volumes takes PROJECT names, -o, --no-headers and --ignore-not-found only")
    fmt = settings.output_format(output).lower()
    run(get_volumes(settings, names, fmt, no_headers=no_headers, ignore_not_found=missing_ok))


__all__ = ["HEADERS", "NAMES", "NO_VOLUMES", "VolumeRow", "is_volumes", "render", "volume_rows", "volumes_command"]
