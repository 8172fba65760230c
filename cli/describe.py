"""`caractrl describe RESOURCE NAME…`: everything about an object of any kind, in a readable layout, with its
events (projects, nodes, leases and events have layouts of their own; other kinds show metadata, spec, status).

The events of the kind are listed once (field selector `involvedObject.kind=…`) and matched here on the involved
object's name (and uid).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import click

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import Forbidden, NotFound

from caravanserai.cli.common import complete_names, complete_resource, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.describe_node import describe_node
from caravanserai.cli.describe_other import describe_event, describe_generic, describe_lease, describe_secret
from caravanserai.cli.describe_project import describe_project
from caravanserai.cli.errors import PartialFailure, report
from caravanserai.cli.layout import events_about
from caravanserai.cli.resources import get_object, parse_target


async def _describe_one(client: Client, kind: meta.Kind, name: str, events: list[v1.Event]) -> str:
    obj: Any = await get_object(client.resource(kind.plural), name)
    now = time.time()
    about = events_about(events, obj)
    if kind.plural == "projects":
        return describe_project(obj, about, now, node=await _node_of(client, obj))
    if kind.plural == "leases":
        return describe_lease(obj, about, now)
    if kind.plural == "events":
        return describe_event(obj, about, now)
    if kind.plural == "secrets":
        return describe_secret(obj, about, now)
    if kind.plural != "nodes":
        return describe_generic(obj, about, now)
    bound = await client.projects.list(field_selector=f"status.nodeRef={name}")
    try:
        lease: v1.Lease | None = await client.leases.get(name)
    except NotFound:
        lease = None
    return describe_node(obj, lease, [p for p in bound if p.status.phase in v1.BOUND_PHASES], about, now)


async def _node_of(client: Client, project: v1.Project) -> v1.Node | None:
    """The project's node (None when it has none or it cannot be read)."""
    if not project.status.node_ref or not project.spec.ingress:
        return None
    try:
        return await client.nodes.get(project.status.node_ref)
    except (NotFound, Forbidden):
        return None


async def _describe(settings: Settings, kind: meta.Kind, names: Sequence[str]) -> None:
    failed = False
    async with settings.client() as client:
        if not names:
            names = sorted(o.metadata.name for o in await client.resource(kind.plural).list())
        selector = f"involvedObject.kind={kind.kind}"
        events = list(await client.events.list(field_selector=selector)) if names else []
        for index, name in enumerate(names):
            try:
                text = await _describe_one(client, kind, name, events)
            except NotFound as exc:
                report(exc)
                failed = True
                continue
            click.echo(("\n" if index else "") + text, nl=False)
    if failed:
        raise PartialFailure()


@click.command("describe")
@click.argument("resource", shell_complete=complete_resource)
@click.argument("names", nargs=-1, shell_complete=complete_names)
@pass_settings
def describe(settings: Settings, resource: str, names: Sequence[str]) -> None:
    """Show every detail of objects of any kind (all of the kind when no NAME is given), with their events."""
    kind, wanted = parse_target(resource, names)
    run(_describe(settings, kind, wanted))


__all__ = ["describe"]
