"""Configs in caractrl: the `get` table; `describe` shows metadata, spec and status.

NAME DATA AGE   (wide: + KEYS)
"""

from __future__ import annotations

from caravanserai import v1
from caravanserai.cli.kinds.base import KindView
from caravanserai.cli.kinds.users import data_users
from caravanserai.cli.printers import NONE, age
from caravanserai.cli.tables import Columns, RowContext
from caravanserai.project import datarefs


def config_row(config: v1.Config, ctx: RowContext, wide: bool) -> list[str]:
    row = [config.metadata.name, str(len(config.spec.data)), age(config.metadata.creation_timestamp, ctx.now)]
    if wide:
        row.append(", ".join(sorted(config.spec.data)) or NONE)
    return row


VIEW = KindView(
    "configs",
    Columns(("NAME", "DATA", "AGE"), ("NAME", "DATA", "AGE", "KEYS"), config_row),
    deletable=True,
    users=data_users(datarefs.CONFIGS),
)

__all__ = ["VIEW", "config_row"]
