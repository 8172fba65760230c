"""ResourceQuotas in caractrl: the `get` table; `describe` shows metadata, spec and status.

NAME POLICY USED QUEUED AGE   (USED: "cpu 1500m/2, projects 3/10", each limit with what the namespace uses of it)
"""

from __future__ import annotations

from caravanserai import v1
from caravanserai.cli.kinds.base import KindView
from caravanserai.cli.printers import NONE, age
from caravanserai.cli.tables import Columns, RowContext


def used_of(q: v1.ResourceQuota) -> str:
    """Each limit with what is used of it, in the quota's own order of names."""
    return (
        ", ".join(f"{name} {q.status.used.get(name, '0')}/{hard}" for name, hard in sorted(q.spec.hard.items())) or NONE
    )


def quota_row(q: v1.ResourceQuota, ctx: RowContext, wide: bool) -> list[str]:
    return [
        q.metadata.name,
        q.spec.policy,
        used_of(q),
        str(q.status.queued),
        age(q.metadata.creation_timestamp, ctx.now),
    ]


VIEW = KindView(
    "resourcequotas",
    Columns(("NAME", "POLICY", "USED", "QUEUED", "AGE"), ("NAME", "POLICY", "USED", "QUEUED", "AGE"), quota_row),
    deletable=True,
)

__all__ = ["VIEW", "quota_row", "used_of"]
