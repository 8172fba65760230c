"""Leases in caractrl: the `get` table and the `describe` layout (held, expired or free, by this machine's clock).

NAME HOLDER AGE   (wide: + DURATION RENEWED TRANSITIONS)
"""

from __future__ import annotations

from caravanserai import v1
from caravanserai.cli.describe_other import describe_lease
from caravanserai.cli.kinds.base import KindView, offline
from caravanserai.cli.printers import NONE, age, or_none
from caravanserai.cli.tables import Columns, RowContext


def lease_row(lease: v1.Lease, ctx: RowContext, wide: bool) -> list[str]:
    row = [lease.metadata.name, or_none(lease.spec.holder_identity), age(lease.metadata.creation_timestamp, ctx.now)]
    if wide:
        duration = f"{lease.spec.lease_duration_seconds}s" if lease.spec.lease_duration_seconds else NONE
        row += [duration, age(lease.spec.renew_time, ctx.now), str(lease.spec.lease_transitions)]
    return row


VIEW = KindView(
    "leases",
    Columns(("NAME", "HOLDER", "AGE"), ("NAME", "HOLDER", "AGE", "DURATION", "RENEWED", "TRANSITIONS"), lease_row),
    describe=offline(describe_lease),
)

__all__ = ["VIEW", "lease_row"]
