"""`caractrl get RESOURCE [NAME…]`: tables, json/yaml/name, selectors and `--watch`.

caractrl get projects                        # table of every project
caractrl get p web -o yaml                   # one object as YAML
caractrl get no -o wide -l zone=a            # wide table, label selector
caractrl get projects -w                     # the table, then one line per change (survives restarts)
caractrl get events --for project/web        # the events about one object
caractrl get snapshots web                   # the volume snapshots recorded for project web (not a stored kind)
caractrl get volumes                         # every project's Persistent volumes and the node they live on
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import click

from caravanserai import meta, v1
from caravanserai.cli.common import complete_names, complete_resource, output_option, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import PartialFailure, report
from caravanserai.cli.kinds import columns_of, load_context, rows, view_of
from caravanserai.cli.printers import TableWriter, object_dict, render_data, render_objects, resource_name
from caravanserai.cli.resources import get_object, parse_target, split_target
from caravanserai.cli.scope import nothing_found, scoped
from caravanserai.cli.snapshots import is_snapshots, snapshots_command
from caravanserai.cli.volumelist import is_volumes, volumes_command
from caravanserai.cli.watching import Selection, SelectionWatch
from caravanserai.client import Change, Client
from caravanserai.errors import NotFound


@dataclass
class GetOptions:
    """What to show and how."""

    kind: meta.Kind
    names: list[str]
    fmt: str
    label_selector: str = ""
    field_selector: str = ""
    no_headers: bool = False
    ignore_not_found: bool = False
    watch_events: bool = False
    about: tuple[meta.Kind, str] | None = None  # `--for KIND/NAME`: only the events of that object (by uid)
    all_namespaces: bool = False  # `-A`: every namespace, a NAMESPACE column first (namespaced kinds)

    @property
    def table(self) -> bool:
        return self.fmt in ("table", "wide")


@click.command("get")
@click.argument("resource", shell_complete=complete_resource)
@click.argument("names", nargs=-1, shell_complete=complete_names)
@output_option(with_jsonpath=True)
@click.option("-l", "--selector", "label_selector", default="", help="Label selector, e.g. app=web,tier!=db.")
@click.option(
    "--field-selector",
    default="",
    help="Field selector: metadata.name for every kind; status.phase, status.nodeRef for projects; "
    "involvedObject.kind, involvedObject.name, involvedObject.uid, reason, type for events.",
)
@click.option(
    "--for",
    "for_object",
    metavar="KIND/NAME",
    default="",
    help="Only the events about this object, e.g. project/web (events only): the object of that name now, by "
    "uid, not earlier ones of the same name.",
)
@click.option("-w", "--watch", is_flag=True, help="After listing, print every change (resumes after disconnects).")
@click.option("--watch-only", is_flag=True, help="Print only changes, not the current objects.")
@click.option("--output-watch-events", is_flag=True, help="Prefix watched objects with ADDED/MODIFIED/DELETED.")
@click.option("--no-headers", is_flag=True, help="Omit the table header.")
@click.option("--ignore-not-found", is_flag=True, help="Missing named objects are not an error.")
@pass_settings
def get(
    settings: Settings,
    resource: str,
    names: Sequence[str],
    output: str | None,
    label_selector: str,
    field_selector: str,
    for_object: str,
    watch: bool,
    watch_only: bool,
    output_watch_events: bool,
    no_headers: bool,
    ignore_not_found: bool,
) -> None:
    """Show nodes, projects, events, leases, admissionpolicies, resourcedefinitions or objects of a custom kind.

    `get snapshots [PROJECT…]`: the volume snapshots in projects' status (not a stored kind: takes project names).
    `get volumes [PROJECT…]`: the projects' Persistent volumes, where they live, backed up or not, their size."""
    if (is_volumes(resource) or is_snapshots(resource)) and settings.all_namespaces and names:
        raise click.UsageError("projects cannot be named across all namespaces: give -n NS instead of -A")
    if is_volumes(resource):
        refused = any((label_selector, field_selector, for_object, watch, watch_only, output_watch_events))
        volumes_command(settings, names, output, refused=refused, no_headers=no_headers, missing_ok=ignore_not_found)
        return
    if is_snapshots(resource):
        refused = any((label_selector, field_selector, for_object, watch, watch_only, output_watch_events))
        snapshots_command(settings, names, output, refused=refused, no_headers=no_headers, missing_ok=ignore_not_found)
        return
    kind, wanted = parse_target(resource, names)
    if settings.all_namespaces and wanted and not kind.cluster_scoped:
        raise click.UsageError("a resource cannot be retrieved by name across all namespaces: give -n NS instead of -A")
    about = split_target(for_object) if for_object else None
    if for_object:
        field_selector = ",".join(filter(None, (field_selector, events_for(kind, for_object))))
    if wanted and (label_selector or field_selector) and not (watch or watch_only):
        raise click.UsageError("names cannot be given together with a selector")
    opts = GetOptions(
        kind,
        wanted,
        output or settings.output_format(None),
        label_selector,
        field_selector,
        no_headers,
        ignore_not_found,
        output_watch_events,
        about,
        settings.all_namespaces,
    )
    if watch or watch_only:
        run(_watch(settings, opts, show_current=not watch_only))
    else:
        run(_get(settings, opts))


def events_for(kind: meta.Kind, target: str) -> str:
    """The field selector of `get events --for KIND/NAME` (the kind's `for_selector`; only events have one)."""
    narrow = view_of(kind).for_selector
    if narrow is None:
        raise click.UsageError("--for selects events; use it with `get events`")
    about, name = split_target(target)
    return narrow(about, name)


async def _only_current(client: Client, opts: GetOptions) -> None:
    """Narrow `--for KIND/NAME` to the events of the object that has that name now (by uid), not of earlier
    objects of the same name; to the name alone when no such object exists (its events outlive it)."""
    if opts.about is None:
        return
    kind, name = opts.about
    try:
        uid = (await client.resource(kind.plural).get(name)).metadata.uid
    except NotFound:
        return
    if uid:
        opts.field_selector = f"{opts.field_selector},involvedObject.uid={uid}"


async def _get(settings: Settings, opts: GetOptions) -> None:
    async with settings.client() as client:
        await _only_current(client, opts)
        objects, missing = await _fetch(client, opts)
        await _print(client, opts, objects, listing=not opts.names)
    if missing and not opts.ignore_not_found:
        raise PartialFailure()


async def _fetch(client: Client, opts: GetOptions) -> tuple[list[Any], int]:
    """The named objects (reporting each missing one) or the selected list; and how many were missing."""
    resources = scoped(client, opts.kind, all_namespaces=opts.all_namespaces)
    if not opts.names:
        page = await resources.list(label_selector=opts.label_selector, field_selector=opts.field_selector)
        return page.items, 0
    found, missing = [], 0
    for name in opts.names:
        try:
            found.append(await get_object(resources, name))
        except NotFound as exc:
            missing += 1
            if not opts.ignore_not_found:
                report(exc)
    return found, missing


async def _print(client: Client, opts: GetOptions, objects: list[Any], *, listing: bool) -> None:
    if not opts.table:
        if objects or listing or len(opts.names) > 1:
            single = len(opts.names) == 1
            click.echo(render_objects(objects, opts.fmt, single=single, list_kind=f"{opts.kind.kind}List"), nl=False)
        return
    if not objects:
        if listing:
            click.echo(nothing_found(client, opts.kind, all_namespaces=opts.all_namespaces), err=True)
        return
    context = await load_context(client, opts.kind)
    wide = opts.fmt == "wide"
    columns = columns_of(opts.kind, all_namespaces=opts.all_namespaces)
    writer = TableWriter(columns.header(wide), show_headers=not opts.no_headers)
    for line in writer.lines(rows(opts.kind, objects, context, wide=wide, all_namespaces=opts.all_namespaces)):
        click.echo(line)


# ---- watch --------------------------------------------------------------------------------------------------


def _selection(opts: GetOptions) -> Selection:
    """Server-side selectors; a single name becomes `metadata.name=…`, several are filtered here."""
    field = opts.field_selector
    names: frozenset[str] = frozenset()
    if len(opts.names) == 1:
        field = ",".join(filter(None, (field, f"metadata.name={opts.names[0]}")))
    elif opts.names:
        names = frozenset(opts.names)
    return Selection(opts.label_selector, field, names)


class WatchPrinter:
    """Prints watched objects in the chosen format, table rows aligned under the first table."""

    def __init__(self, client: Client, opts: GetOptions) -> None:
        self.client = client
        self.opts = opts
        self.wide = opts.fmt == "wide"
        headers = columns_of(opts.kind, all_namespaces=opts.all_namespaces).header(self.wide)
        if opts.watch_events:
            headers = ["EVENT", *headers]
        self.writer = TableWriter(headers, show_headers=not opts.no_headers)
        if opts.watch_events:  # room for the longest event type from the start, so rows stay aligned
            self.writer.widths[0] = max(len(t) for t in (v1.ADDED, v1.MODIFIED, v1.DELETED))

    async def print(self, events: Sequence[Change[Any]]) -> None:
        if not events:
            return
        if self.opts.table:
            context = await load_context(self.client, self.opts.kind)
            lines = []
            for event in events:
                row = rows(
                    self.opts.kind, [event.object], context, wide=self.wide, all_namespaces=self.opts.all_namespaces
                )[0]
                lines.append([event.type, *row] if self.opts.watch_events else row)
            for line in self.writer.lines(lines):
                click.echo(line)
            return
        for event in events:
            click.echo(self._render(event), nl=False)

    def _render(self, event: Change[Any]) -> str:
        if self.opts.fmt == "name":
            prefix = f"{event.type} " if self.opts.watch_events else ""
            return f"{prefix}{resource_name(event.object)}\n"
        data: Any = object_dict(event.object)
        if self.opts.watch_events:
            data = {"type": event.type, "object": data}
        text = render_data(data, self.opts.fmt)
        return "---\n" + text if self.opts.fmt == "yaml" else text


async def _watch(settings: Settings, opts: GetOptions, *, show_current: bool) -> None:
    async with settings.client() as client:
        await _only_current(client, opts)
        await _watch_with(client, opts, show_current=show_current)


async def _watch_with(client: Client, opts: GetOptions, *, show_current: bool) -> None:
    async with SelectionWatch(
        scoped(client, opts.kind, all_namespaces=opts.all_namespaces), _selection(opts)
    ) as watcher:
        current = await watcher.list_current()
        printer = WatchPrinter(client, opts)
        if show_current:
            ordered = sorted(current, key=columns_of(opts.kind, all_namespaces=opts.all_namespaces).sort_key)
            await printer.print([Change(v1.ADDED, o) for o in ordered])
            if not ordered and opts.table:
                click.echo(nothing_found(client, opts.kind, all_namespaces=opts.all_namespaces), err=True)
        async with aclosing(watcher.events()) as events:
            async for event in events:
                await printer.print([event])


__all__ = ["GetOptions", "WatchPrinter", "events_for", "get"]
