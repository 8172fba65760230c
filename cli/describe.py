"""`caractrl describe RESOURCE NAME…`: everything about an object of any kind, in a readable layout, with its
events, in the layout of the kind's entry in the CLI's kind table (`cli/kinds/`; kinds without a layout of their
own, custom kinds among them, show metadata, spec and status).

The events of the kind are listed once (field selector `involvedObject.kind=…`; in the command's namespace for a
namespaced kind) and matched here on the involved object's name (and uid).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import click

from caravanserai import meta, v1
from caravanserai.cli.common import complete_names, complete_resource, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import PartialFailure, report
from caravanserai.cli.kinds import view_of
from caravanserai.cli.layout import events_about
from caravanserai.cli.resources import get_object, parse_target
from caravanserai.cli.scope import scoped
from caravanserai.client import Client
from caravanserai.errors import NotFound


async def _describe_one(client: Client, kind: meta.Kind, name: str, events: list[v1.Event]) -> str:
    obj: Any = await get_object(scoped(client, kind), name)
    return await view_of(kind).describe(client, obj, events_about(events, obj), time.time())


async def _describe(settings: Settings, kind: meta.Kind, names: Sequence[str]) -> None:
    failed = False
    async with settings.client() as client:
        if not names:
            names = sorted(o.metadata.name for o in await scoped(client, kind).list())
        selector = f"involvedObject.kind={kind.kind}"
        # Events about a namespaced kind's objects are in their namespace (a user of that namespace may list them
        # there, not everywhere); those about a cluster-wide kind's anywhere.
        about = client.events if kind.cluster_scoped else scoped(client, "events")
        events = list(await about.list(field_selector=selector)) if names else []
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
