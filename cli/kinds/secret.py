"""Secrets in caractrl: the `get` table and the `describe` layout, which show keys and sizes, never a value.

NAME TYPE DATA AGE   (wide: + KEYS)
"""

from __future__ import annotations

from caravanserai import v1
from caravanserai.cli.describe_other import describe_secret
from caravanserai.cli.kinds.base import KindView, offline
from caravanserai.cli.kinds.users import data_users
from caravanserai.cli.printers import NONE, age
from caravanserai.cli.tables import Columns, RowContext
from caravanserai.project import datarefs


def secret_row(secret: v1.Secret, ctx: RowContext, wide: bool) -> list[str]:
    """Name, type, number of keys, age: never a value."""
    row = [secret.metadata.name, secret.spec.type or v1.SECRET_OPAQUE, str(len(secret.spec.data))]
    row.append(age(secret.metadata.creation_timestamp, ctx.now))
    if wide:
        row.append(", ".join(sorted(secret.spec.data)) or NONE)
    return row


VIEW = KindView(
    "secrets",
    Columns(("NAME", "TYPE", "DATA", "AGE"), ("NAME", "TYPE", "DATA", "AGE", "KEYS"), secret_row),
    describe=offline(describe_secret),
    deletable=True,
    users=data_users(datarefs.SECRETS),
)

__all__ = ["VIEW", "secret_row"]
