"""ResourceDefinitions in caractrl: the `get` table and `delete` (which deletes every object of the kind too, at once
when none holds a finalizer; otherwise the definition stays, marked, until the last object's finalizers are done,
and `delete` says how many objects it waits for); `describe` shows metadata, spec and status.

    NAME KIND SHORTNAMES AGE   (wide: + COLUMNS NODE-VERBS)
"""

from __future__ import annotations

from caravanserai import v1
from caravanserai.cli.kinds.base import KindView
from caravanserai.cli.printers import age, or_none
from caravanserai.cli.tables import Columns, RowContext
from caravanserai.client import Client
from caravanserai.errors import CaravanseraiError


async def waiting_instances(client: Client, definition: v1.ResourceDefinition) -> str:
    """`3 object(s) of its kind waiting on finalizers`: the objects that keep a deleted definition."""
    await client.discover()
    try:
        listed = (await client.resource(definition.spec.plural).list()).items
        left = sum(1 for obj in listed if obj.metadata.finalizers)
    except (CaravanseraiError, KeyError):
        return "waiting on the finalizers of objects of its kind"
    return f"{left} object(s) of its kind waiting on finalizers; removed when the last is gone"


def definition_row(definition: v1.ResourceDefinition, ctx: RowContext, wide: bool) -> list[str]:
    spec = definition.spec
    row = [
        definition.metadata.name,
        spec.kind,
        or_none(",".join(spec.short_names)),
        age(definition.metadata.creation_timestamp, ctx.now),
    ]
    if wide:
        row += [or_none(",".join(c.name for c in spec.printer_columns)), or_none(",".join(spec.node_verbs))]
    return row


VIEW = KindView(
    "resourcedefinitions",
    Columns(
        ("NAME", "KIND", "SHORTNAMES", "AGE"),
        ("NAME", "KIND", "SHORTNAMES", "AGE", "COLUMNS", "NODE-VERBS"),
        definition_row,
    ),
    deletable=True,
    deletion_note=waiting_instances,
)

__all__ = ["VIEW", "definition_row"]
