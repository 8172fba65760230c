"""`caractrl get snapshots [PROJECT…]`: the restic snapshots recorded in projects' `status.volumes[].snapshots`.

    $ caractrl get snapshots wiki
    ID         TIME   VOLUME   NODE     SIZE
    4f1c2a9b   2m     data     node-a   1.0GiB
    9ab01c3d   7m     data     node-a   1.0GiB

`snapshots` is not a stored kind: it reads the named projects (every project when none is named; a PROJECT column
is added unless exactly one is named; with `-A/--all-namespaces`, every namespace's projects and a NAMESPACE column
first). `-o wide` adds ADDED, DURATION and EPOCH (the copy of the volume each was
taken from, so two nodes' snapshots tell apart); `-o json|yaml` prints a `SnapshotList` whose items are the
snapshot records with their project and volume; `-o name` prints `snapshot/<full id>`. ID is the first 8 hex digits
(what `caractrl restore --snapshot` accepts, as long as it is unique); TIME is the snapshot's age.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
from google.protobuf import json_format

from caravanserai import v1
from caravanserai.cli.common import run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import PartialFailure, report
from caravanserai.cli.printers import TableWriter, age, or_none, render_data
from caravanserai.cli.resources import get_object
from caravanserai.cli.scope import scoped
from caravanserai.client.volumestatus import short_id, size_text, took_text
from caravanserai.clock import SystemClock
from caravanserai.errors import NotFound

NAMES = ("snapshots", "snapshot")
"""The words `get` takes for snapshots."""
NO_SNAPSHOTS = "No snapshots found."
HEADERS = ("ID", "TIME", "VOLUME", "NODE", "SIZE")
WIDE_HEADERS = (*HEADERS, "ADDED", "DURATION", "EPOCH")


def is_snapshots(resource: str) -> bool:
    """Whether `get RESOURCE` asks for snapshots."""
    return resource.lower() in NAMES


def records(project: v1.Project) -> list[tuple[str, v1.SnapshotRecord]]:
    """(volume, snapshot) of every snapshot recorded for `project`, volume by volume, newest first within each."""
    return [(volume.name, snapshot) for volume in project.status.volumes for snapshot in volume.snapshots]


def snapshot_row(volume: str, record: v1.SnapshotRecord, now: float, *, wide: bool) -> list[str]:
    """One table row: ID TIME VOLUME NODE SIZE (wide: + ADDED DURATION EPOCH)."""
    row = [
        or_none(short_id(record.id)),
        age(record.time, now),
        volume,
        or_none(record.node),
        size_text(record.size_bytes),
    ]
    if wide:
        row += [size_text(record.bytes_added), took_text(record.duration_seconds), or_none(record.epoch)]
    return row


def snapshot_rows(
    projects: Sequence[v1.Project], now: float, *, wide: bool, with_project: bool, all_namespaces: bool = False
) -> list[list[str]]:
    """The rows of every snapshot of `projects` (a PROJECT cell first when `with_project`, after a NAMESPACE cell
    when `all_namespaces`)."""
    rows = []
    for project in projects:
        first = [project.metadata.namespace] if all_namespaces else []
        if with_project or all_namespaces:
            first.append(project.metadata.name)
        for volume, record in records(project):
            rows.append([*first, *snapshot_row(volume, record, now, wide=wide)])
    return rows


def snapshot_list(projects: Sequence[v1.Project]) -> dict[str, Any]:
    """`{apiVersion, kind: SnapshotList, items: [{project, volume, id, time, node, sizeBytes, …}]}`."""
    items = [
        {
            "project": p.metadata.name,
            "namespace": p.metadata.namespace,
            "volume": volume,
            **json_format.MessageToDict(record),
        }
        for p in projects
        for volume, record in records(p)
    ]
    return {"apiVersion": v1.API_VERSION, "kind": "SnapshotList", "items": items}


def render(
    projects: Sequence[v1.Project],
    fmt: str,
    now: float,
    *,
    with_project: bool,
    no_headers: bool,
    all_namespaces: bool = False,
) -> list[str]:
    """The lines `get snapshots` prints in format `fmt` (table, wide, json, yaml, name); empty when there are no
    snapshots in a table format. `all_namespaces`: NAMESPACE and PROJECT columns first."""
    if fmt in ("json", "yaml"):
        return [render_data(snapshot_list(projects), fmt).rstrip("\n")]
    if fmt == "name":
        return [f"snapshot/{record.id}" for p in projects for _, record in records(p)]
    wide = fmt == "wide"
    rows = snapshot_rows(projects, now, wide=wide, with_project=with_project, all_namespaces=all_namespaces)
    if not rows:
        return []
    first = ["NAMESPACE", "PROJECT"] if all_namespaces else ["PROJECT"] if with_project else []
    headers = first + list(WIDE_HEADERS if wide else HEADERS)
    return TableWriter(headers, show_headers=not no_headers).lines(rows)


async def named_projects(
    settings: Settings, names: Sequence[str], ignore_not_found: bool
) -> tuple[list[v1.Project], int]:
    """The named projects (every one, by name, when none is named) and how many named ones are missing (each
    reported unless `ignore_not_found`)."""
    async with settings.client() as client:
        if not names:
            return sorted(
                await scoped(client, "projects", all_namespaces=settings.all_namespaces).list(),
                key=lambda p: (p.metadata.namespace, p.metadata.name) if settings.all_namespaces else p.metadata.name,
            ), 0
        found, missing = [], 0
        for name in names:
            try:
                found.append(await get_object(client.projects, name))
            except NotFound as exc:
                missing += 1
                if not ignore_not_found:
                    report(exc)
        return found, missing


async def get_snapshots(
    settings: Settings, names: Sequence[str], fmt: str, *, no_headers: bool, ignore_not_found: bool
) -> None:
    """Print the snapshots of the named projects (all when none is named); exit 1 when a named one is missing."""
    projects, missing = await named_projects(settings, names, ignore_not_found)
    lines = render(
        projects,
        fmt,
        SystemClock().now(),
        with_project=len(names) != 1,
        no_headers=no_headers,
        all_namespaces=settings.all_namespaces,
    )
    for line in lines:
        click.echo(line)
    if not lines and fmt in ("table", "wide") and (projects or not names):
        click.echo(NO_SNAPSHOTS, err=True)
    if missing and not ignore_not_found:
        raise PartialFailure()


def snapshots_command(
    settings: Settings, names: Sequence[str], output: str | None, *, refused: bool, no_headers: bool, missing_ok: bool
) -> None:
    """`get snapshots`: a usage error when `refused` (selectors, --for or watching were given), else the listing."""
    if refused:
        raise click.UsageError("get snapshots takes PROJECT names, -o, --no-headers and --ignore-not-found only")
    fmt = settings.output_format(output).lower()
    run(get_snapshots(settings, names, fmt, no_headers=no_headers, ignore_not_found=missing_ok))


__all__ = [
    "HEADERS",
    "NAMES",
    "named_projects",
    "NO_SNAPSHOTS",
    "WIDE_HEADERS",
    "get_snapshots",
    "is_snapshots",
    "records",
    "render",
    "snapshot_list",
    "snapshot_row",
    "snapshot_rows",
    "snapshots_command",
]
