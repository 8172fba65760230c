"""Roles and bindings in caractrl: the `get` tables; `describe` shows metadata, spec and status.

roles, clusterroles:                 NAME RULES AGE            (wide: + VERBS ON KINDS)
rolebindings, clusterrolebindings:   NAME ROLE SUBJECTS AGE
"""

from __future__ import annotations

from typing import Any

from caravanserai.cli.kinds.base import KindView
from caravanserai.cli.printers import NONE, age
from caravanserai.cli.tables import Columns, RowContext


def _rules(role: Any) -> str:
    return "; ".join(f"{','.join(r.verbs)} {','.join(r.kinds)}" for r in role.spec.rules) or NONE


def role_row(role: Any, ctx: RowContext, wide: bool) -> list[str]:
    row = [role.metadata.name, str(len(role.spec.rules)), age(role.metadata.creation_timestamp, ctx.now)]
    if wide:
        row.append(_rules(role))
    return row


def binding_row(binding: Any, ctx: RowContext, wide: bool) -> list[str]:
    ref = binding.spec.role_ref
    subjects = ", ".join(f"{s.kind}/{s.name}" for s in binding.spec.subjects) or NONE
    return [
        binding.metadata.name,
        f"{ref.kind}/{ref.name}",
        subjects,
        age(binding.metadata.creation_timestamp, ctx.now),
    ]


ROLE_COLUMNS = Columns(("NAME", "RULES", "AGE"), ("NAME", "RULES", "AGE", "VERBS ON KINDS"), role_row)
BINDING_COLUMNS = Columns(("NAME", "ROLE", "SUBJECTS", "AGE"), ("NAME", "ROLE", "SUBJECTS", "AGE"), binding_row)
ROLE_VIEW = KindView("roles", ROLE_COLUMNS, deletable=True)
CLUSTER_ROLE_VIEW = KindView("clusterroles", ROLE_COLUMNS, deletable=True)
ROLE_BINDING_VIEW = KindView("rolebindings", BINDING_COLUMNS, deletable=True)
CLUSTER_ROLE_BINDING_VIEW = KindView("clusterrolebindings", BINDING_COLUMNS, deletable=True)
VIEWS = (ROLE_VIEW, CLUSTER_ROLE_VIEW, ROLE_BINDING_VIEW, CLUSTER_ROLE_BINDING_VIEW)

__all__ = ["BINDING_COLUMNS", "ROLE_COLUMNS", "VIEWS", "binding_row", "role_row"]
