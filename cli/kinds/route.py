"""Routes in caractrl: the `get` table; `describe` shows metadata and spec. Routes are derived by the routes
controller from projects and nodes (never written by hand), so they are neither deleted nor waited for here.

NAME PHASE NODE HOSTS AGE   (wide: + ADDRESS PREVIOUS)
"""

from __future__ import annotations

from caravanserai import v1
from caravanserai.cli.kinds.base import KindView
from caravanserai.cli.printers import NONE, age, or_none
from caravanserai.cli.tables import Columns, RowContext


def hosts_of(route: v1.Route) -> str:
    """Each host with its scope, in the project's order."""
    return ", ".join(f"{h.host} ({h.scope})" for h in route.spec.hosts) or NONE


def route_row(route: v1.Route, ctx: RowContext, wide: bool) -> list[str]:
    spec = route.spec
    row = [route.metadata.name, or_none(spec.phase), or_none(spec.node.node), hosts_of(route)]
    row.append(age(route.metadata.creation_timestamp, ctx.now))
    if wide:
        address = f"{spec.node.address}:{spec.node.ingress_port}" if spec.node.address else NONE
        row += [address, or_none(spec.previous_node.node)]
    return row


VIEW = KindView(
    "routes",
    Columns(
        ("NAME", "PHASE", "NODE", "HOSTS", "AGE"),
        ("NAME", "PHASE", "NODE", "HOSTS", "AGE", "ADDRESS", "PREVIOUS"),
        route_row,
    ),
)

__all__ = ["VIEW", "hosts_of", "route_row"]
