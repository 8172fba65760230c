"""The CLI's table of kinds: one `KindView` per built-in kind (`base.KindView`: its `get` columns, `describe`
layout, `wait` fields, schema bits …), one module each, keyed by plural — the client-side twin of the apiserver's
`KindTable`. `get`, `describe`, `wait`, `schema` and `delete` look a kind up here and never name one
(`tests/unit/cli/test_cli_kind_table.py` checks it).

A custom kind has no module: `view_of` makes its view from the definition's printer columns (NAME, the columns,
AGE), with the generic description (metadata, spec, status) and `condition=`/`delete` waits.

Adding a built-in kind to the CLI is one module here (its `VIEW`) and one line in `VIEWS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from caravanserai import meta
from caravanserai.cli.kinds import (
    admissionpolicy,
    backuprepository,
    config,
    definition,
    event,
    lease,
    namespace,
    node,
    nodegroup,
    project,
    projectset,
    rbac,
    resourcequota,
    route,
    secret,
)
from caravanserai.cli.kinds.base import Condition, KindView, SchemaBits
from caravanserai.cli.tables import Columns, RowContext, custom_columns
from caravanserai.client import Client

VIEWS: dict[str, KindView] = {
    view.plural: view
    for view in (
        project.VIEW,
        node.VIEW,
        lease.VIEW,
        event.VIEW,
        definition.VIEW,
        secret.VIEW,
        config.VIEW,
        backuprepository.VIEW,
        admissionpolicy.VIEW,
        nodegroup.VIEW,
        namespace.VIEW,
        projectset.VIEW,
        *rbac.VIEWS,
        resourcequota.VIEW,
        route.VIEW,
    )
}
"""The built-in kinds' views, by plural."""


def view_of(kind: meta.Kind) -> KindView:
    """The view of `kind`: its own for a built-in kind, made from the definition's printer columns otherwise."""
    found = VIEWS.get(kind.plural)
    if found is not None:
        return found
    return KindView(kind.plural, custom_columns(kind), waitable=True, deletable=True)


def plurals(having: Callable[[KindView], bool]) -> tuple[str, ...]:
    """The built-in kinds (sorted plurals) whose view has `having` (`lambda v: v.deletable`)."""
    return tuple(sorted(plural for plural, view in VIEWS.items() if having(view)))


def columns_of(kind: meta.Kind, *, all_namespaces: bool = False) -> Columns:
    """The `get` table of `kind`; with `all_namespaces` (`get -A`), a namespaced kind's has a NAMESPACE column first
    (a cluster-wide kind's never has one)."""
    columns = view_of(kind).columns
    return columns.with_namespace() if all_namespaces and not kind.cluster_scoped else columns


async def load_context(client: Client, kind: meta.Kind) -> RowContext:
    """What the rows of `kind` look up besides their own objects (listed once per table)."""
    return await view_of(kind).lookups(client)


def rows(
    kind: meta.Kind, objects: Sequence[Any], ctx: RowContext, *, wide: bool, all_namespaces: bool = False
) -> list[list[str]]:
    """The rows for `objects` of `kind`, in the kind's order (names; events by time), namespace first with
    `all_namespaces` (see `columns_of`)."""
    columns = columns_of(kind, all_namespaces=all_namespaces)
    return [columns.row(o, ctx, wide) for o in sorted(objects, key=columns.sort_key)]


__all__ = [
    "Condition",
    "KindView",
    "SchemaBits",
    "VIEWS",
    "columns_of",
    "load_context",
    "plurals",
    "rows",
    "view_of",
]
