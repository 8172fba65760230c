"""Namespaces in caractrl: the `get` table and the `describe` layout.

NAME STATUS AGE   (wide: + LABELS)
"""

from __future__ import annotations

from caravanserai import v1
from caravanserai.cli.kinds.base import KindView
from caravanserai.cli.printers import age, key_values
from caravanserai.cli.tables import Columns, RowContext


def namespace_row(namespace: v1.Namespace, ctx: RowContext, wide: bool) -> list[str]:
    """Name, phase (Active, Terminating; Active until the apiserver wrote one), age."""
    row = [
        namespace.metadata.name,
        namespace.status.phase or v1.NAMESPACE_ACTIVE,
        age(namespace.metadata.creation_timestamp, ctx.now),
    ]
    if wide:
        row.append(key_values(namespace.metadata.labels))
    return row


VIEW = KindView(
    "namespaces",
    Columns(("NAME", "STATUS", "AGE"), ("NAME", "STATUS", "AGE", "LABELS"), namespace_row),
    waitable=True,
    deletable=True,
    wait_fields={"phase": lambda namespace: namespace.status.phase},
)

__all__ = ["VIEW", "namespace_row"]
