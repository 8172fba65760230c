"""NodeGroups in caractrl: the `get` table, the `describe` layout (sizes, template, provider, scale-down settings,
the autoscaler's decisions, the group's nodes) and the schema of a group manifest.

    NAME MIN MAX DESIRED CURRENT PROVIDER LAST-SCALE-UP LAST-SCALE-DOWN AGE   (wide: + TEMPLATE)
"""

from __future__ import annotations

from collections.abc import Sequence

from caravanserai import v1
from caravanserai.cli.kinds.base import KindView, SchemaBits
from caravanserai.cli.layout import Writer, listing, metadata_fields, write_conditions, write_events
from caravanserai.cli.printers import NONE, age, key_values, or_none, when
from caravanserai.cli.tables import Columns, RowContext
from caravanserai.client import Client
from caravanserai.errors import Forbidden

HEADERS = ("NAME", "MIN", "MAX", "DESIRED", "CURRENT", "PROVIDER", "LAST-SCALE-UP", "LAST-SCALE-DOWN", "AGE")


def provider_name(spec: v1.NodeGroupSpec) -> str:
    """`exec`, `grpc(HOST:PORT)` or `<none>`."""
    if spec.provider.HasField("grpc"):
        return f"grpc({spec.provider.grpc.address})"
    return "exec" if spec.provider.HasField("exec") else NONE


def decision_text(decision: v1.ScalingDecision, now: float) -> str:
    """`1→2 (3m ago)` or `<none>`."""
    if not decision.HasField("time"):
        return NONE
    return f"{decision.from_size}→{decision.to_size} ({age(decision.time, now)} ago)"


def template_text(template: v1.NodeTemplate) -> str:
    resources = template.allocatable or template.capacity
    return key_values(dict(resources))


def group_row(group: v1.NodeGroup, ctx: RowContext, wide: bool) -> list[str]:
    spec, status = group.spec, group.status
    row = [
        group.metadata.name,
        str(spec.min_size),
        str(spec.max_size),
        str(status.desired),
        str(status.current),
        provider_name(spec),
        decision_text(status.last_scale_up, ctx.now),
        decision_text(status.last_scale_down, ctx.now),
        age(group.metadata.creation_timestamp, ctx.now),
    ]
    if wide:
        row.append(template_text(spec.template))
    return row


def _decision_fields(title: str, decision: v1.ScalingDecision, now: float) -> list[tuple[str, str]]:
    if not decision.HasField("time"):
        return [(title, NONE)]
    return [
        (title, f"{decision.from_size} → {decision.to_size}, {when(decision.time, now)}"),
        ("  Reason", or_none(decision.reason)),
        ("  Nodes", ", ".join(decision.nodes) or NONE),
        ("  Projects", ", ".join(decision.projects) or NONE),
    ]


def _settings(spec: v1.NodeGroupSpec) -> list[tuple[str, str]]:
    template, down = spec.template, spec.scale_down
    threshold = f"{down.utilization_threshold:g}" if down.HasField("utilization_threshold") else "0.5 (default)"
    command = " ".join(spec.provider.exec.create) if spec.provider.HasField("exec") else ""
    return [
        ("Min Size", str(spec.min_size)),
        ("Max Size", str(spec.max_size)),
        ("Priority", str(spec.priority)),
        ("Provider", provider_name(spec) + (f": {command}" if command else "")),
        ("Register Timeout", spec.register_timeout or "10m (default)"),
        ("Template Labels", key_values(dict(template.labels))),
        ("Template Taints", listing(f"{t.key}={t.value}:{t.effect}" for t in template.taints)),
        ("Template Capacity", key_values(dict(template.capacity))),
        ("Template Allocatable", key_values(dict(template.allocatable))),
        ("Scale Down", "disabled" if down.disabled else f"idle {down.idle_time or '10m'} under {threshold}"),
    ]


def describe_group(
    group: v1.NodeGroup, events: Sequence[v1.Event], now: float, *, nodes: Sequence[v1.Node] | None
) -> str:
    """Settings, status and decisions, the group's nodes (`nodes` None: they could not be read), events."""
    status = group.status
    out = Writer()
    out.fields([("Name", group.metadata.name), ("Kind", "NodeGroup"), *_settings(group.spec)])
    out.fields(
        [
            ("Desired", str(status.desired)),
            ("Current", str(status.current)),
            ("Backoff Until", when(status.backoff_until, now)),
            *_decision_fields("Last Scale Up", status.last_scale_up, now),
            *_decision_fields("Last Scale Down", status.last_scale_down, now),
            *metadata_fields(group, now),
        ]
    )
    out.heading("Provisioning")
    out.table(
        ("NODE", "REQUESTED", "CREATED"),
        [[p.name, when(p.requested_at, now), "yes" if p.created else "no"] for p in status.provisioning],
    )
    if status.HasField("removing"):
        removing = status.removing
        out.heading("Removing", value=f"{removing.node} since {when(removing.started_at, now)}")
    if nodes is None:
        out.heading("Nodes", value="<unknown: nodes cannot be read>")
    else:
        out.heading("Nodes")
        rows = [
            [
                n.metadata.name,
                n.status.state or NONE,
                "yes" if n.spec.unschedulable else "no",
                when(status.idle_since[n.metadata.name], now) if n.metadata.name in status.idle_since else NONE,
            ]
            for n in nodes
        ]
        out.table(("NODE", "STATE", "CORDONED", "IDLE-SINCE"), rows)
    write_conditions(out, status.conditions, now)
    write_events(out, events, now)
    return out.text()


async def describe(client: Client, group: v1.NodeGroup, events: Sequence[v1.Event], now: float) -> str:
    try:
        nodes: list[v1.Node] | None = list(
            await client.nodes.list(label_selector=f"{v1.LABEL_NODE_GROUP}={group.metadata.name}")
        )
    except Forbidden:
        nodes = None
    return describe_group(group, events, now, nodes=nodes)


VIEW = KindView(
    "nodegroups",
    Columns(HEADERS, (*HEADERS, "TEMPLATE"), group_row),
    describe=describe,
    deletable=True,
    schema=SchemaBits(
        top_required=("spec",),
        required={"NodeGroupSpec": ("maxSize", "provider"), "ExecProvider": ("create", "delete")},
        non_empty=frozenset({("ExecProvider", "create"), ("ExecProvider", "delete")}),
    ),
)

__all__ = ["HEADERS", "VIEW", "decision_text", "describe", "describe_group", "group_row", "provider_name"]
