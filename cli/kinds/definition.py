"""ResourceDefinitions in caractrl: the `get` table and `delete` (which deletes every object of the kind too);
`describe` shows metadata, spec and status.

    NAME KIND SHORTNAMES AGE   (wide: + COLUMNS NODE-VERBS)
"""

from __future__ import annotations

from caravanserai import v1
from caravanserai.cli.kinds.base import KindView
from caravanserai.cli.printers import age, or_none
from caravanserai.cli.tables import Columns, RowContext


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
)

__all__ = ["VIEW", "definition_row"]
