"""ResourceQuotas in caractrl: the `get` table; `describe` shows metadata, spec and status.

NAME POLICY COHORT USED BORROWED QUEUED AGE   (USED: "cpu 1500m/2, projects 3/10", each limit with what the namespace
uses of it; BORROWED: "cpu 1", what it uses beyond its limits by borrowing from its cohort)
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


def borrowed_of(q: v1.ResourceQuota) -> str:
    """What the namespace borrows from its cohort, by resource."""
    return ", ".join(f"{name} {value}" for name, value in sorted(q.status.borrowed.items())) or NONE


def quota_row(q: v1.ResourceQuota, ctx: RowContext, wide: bool) -> list[str]:
    return [
        q.metadata.name,
        q.spec.policy,
        q.spec.cohort or NONE,
        used_of(q),
        borrowed_of(q),
        str(q.status.queued),
        age(q.metadata.creation_timestamp, ctx.now),
    ]


COLUMNS = ("NAME", "POLICY", "COHORT", "USED", "BORROWED", "QUEUED", "AGE")

VIEW = KindView(
    "resourcequotas",
    Columns(COLUMNS, COLUMNS, quota_row),
    deletable=True,
)

__all__ = ["COLUMNS", "VIEW", "borrowed_of", "quota_row", "used_of"]
