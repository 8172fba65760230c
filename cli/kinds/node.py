"""Nodes in caractrl: the `get` table (with the projects bound to each node and its heartbeat), the `describe`
layout, `wait --for state=STATE` and the schema of a node manifest.

    NAME STATE SCHEDULABLE CPU MEMORY PROJECTS AGE   (wide: + LABELS ADDRESS THROUGHPUT IMAGES LAST-HEARTBEAT)
"""

from __future__ import annotations

from collections.abc import Sequence

from caravanserai import v1
from caravanserai.cli.describe_node import describe_node, images_summary
from caravanserai.cli.kinds.base import KindView, SchemaBits
from caravanserai.cli.printers import NONE, UNKNOWN, age, key_values, or_none
from caravanserai.cli.tables import Columns, RowContext, bytes_text, cpu_text
from caravanserai.client import Client
from caravanserai.client.agentlogs import node_address
from caravanserai.errors import NotFound


async def lookups(client: Client) -> RowContext:
    """The projects bound to each node and the nodes' heartbeat Leases, listed once per table."""
    context = RowContext()
    projects = await client.projects.list()
    context.projects_per_node.update(
        p.status.node_ref for p in projects if p.status.node_ref and p.status.phase in v1.BOUND_PHASES
    )
    context.leases = {lease.metadata.name: lease for lease in await client.leases.list()}
    return context


def throughput_text(node: v1.Node) -> str:
    """`↓11.9Mi/s ↑2.9Mi/s`, `<none>` when never measured."""
    measured = node.status.network.throughput
    if not measured.download and not measured.upload:
        return NONE
    return f"↓{bytes_text(measured.download)}/s ↑{bytes_text(measured.upload)}/s"


def node_row(node: v1.Node, ctx: RowContext, wide: bool) -> list[str]:
    allocatable = node.status.allocatable
    row = [
        node.metadata.name,
        or_none(node.status.state, UNKNOWN),
        "false" if node.spec.unschedulable else "true",
        cpu_text(allocatable.get("cpu", "")),
        bytes_text(allocatable.get("memory", "")),
        str(ctx.projects_per_node.get(node.metadata.name, 0)),
        age(node.metadata.creation_timestamp, ctx.now),
    ]
    if wide:
        lease = ctx.leases.get(node.metadata.name)
        heartbeat = age(lease.spec.renew_time, ctx.now) if lease is not None else NONE
        images = images_summary(node.status.images)
        row += [key_values(node.metadata.labels), or_none(node_address(node)), throughput_text(node), images, heartbeat]
    return row


async def describe(client: Client, node: v1.Node, events: Sequence[v1.Event], now: float) -> str:
    """The node with its heartbeat Lease and the projects bound to it."""
    name = node.metadata.name
    bound = await client.projects.list(field_selector=f"status.nodeRef={name}")
    try:
        lease: v1.Lease | None = await client.leases.get(name)
    except NotFound:
        lease = None
    return describe_node(node, lease, [p for p in bound if p.status.phase in v1.BOUND_PHASES], events, now)


VIEW = KindView(
    "nodes",
    Columns(
        ("NAME", "STATE", "SCHEDULABLE", "CPU", "MEMORY", "PROJECTS", "AGE"),
        (
            "NAME",
            "STATE",
            "SCHEDULABLE",
            "CPU",
            "MEMORY",
            "PROJECTS",
            "AGE",
            "LABELS",
            "ADDRESS",
            "THROUGHPUT",
            "IMAGES",
            "LAST-HEARTBEAT",
        ),
        node_row,
    ),
    lookups=lookups,
    describe=describe,
    wait_fields={"state": lambda node: str(node.status.state)},
    waitable=True,
    deletable=True,
    schema=SchemaBits(required={"Taint": ("key", "effect"), "NodeAddress": ("type", "address")}),
)

__all__ = ["VIEW", "describe", "lookups", "node_row", "throughput_text"]
