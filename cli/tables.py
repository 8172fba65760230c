"""The columns `caractrl get` prints for each kind (`-o table` and `-o wide`).

    nodes     NAME STATE SCHEDULABLE CPU MEMORY PROJECTS AGE   (+ LABELS ADDRESS THROUGHPUT LAST-HEARTBEAT)
    projects  NAME PHASE NODE READY RESTARTS AGE                (+ HOSTS REASON MESSAGE)
    events    LAST SEEN TYPE REASON OBJECT MESSAGE              (+ SOURCE COUNT FIRST SEEN NAME, before MESSAGE)
    leases    NAME HOLDER AGE                                   (+ DURATION RENEWED TRANSITIONS)

Node rows need other objects (projects bound to the node, the node's heartbeat Lease): `load_context` lists
them once per table, not once per row.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.client.agentlogs import node_address
from caravanserai.clock import seconds
from caravanserai.text.durations import format_duration
from caravanserai.project.ingresshosts import ingress_host
from caravanserai.text.quantity import cpu_millis, format_bytes, format_cpu, to_int

from caravanserai.cli.printers import NONE, UNKNOWN, age, key_values, or_none


@dataclass
class RowContext:
    """What rows of one table may look up besides their own object."""

    now: float = field(default_factory=time.time)
    projects_per_node: Counter[str] = field(default_factory=Counter)
    leases: dict[str, v1.Lease] = field(default_factory=dict)


async def load_context(client: Client, kind: meta.Kind) -> RowContext:
    """The lookups the rows of `kind` need (projects and leases for nodes; nothing for other kinds)."""
    context = RowContext()
    if kind.plural == "nodes":
        projects = await client.projects.list()
        context.projects_per_node.update(
            p.status.node_ref for p in projects if p.status.node_ref and p.status.phase in v1.BOUND_PHASES
        )
        context.leases = {lease.metadata.name: lease for lease in await client.leases.list()}
    return context


# ---- quantities ---------------------------------------------------------------------------------------------


def cpu_text(quantity: str) -> str:
    """A cpu quantity in canonical form ("4", "3500m"); the raw text when it does not parse."""
    if not quantity:
        return NONE
    try:
        return format_cpu(cpu_millis(quantity))
    except ValueError:
        return quantity


def bytes_text(quantity: str) -> str:
    """A byte quantity for people ("7.5Gi"); the raw text when it does not parse."""
    if not quantity:
        return NONE
    try:
        return format_bytes(to_int(quantity))
    except ValueError:
        return quantity


def throughput_text(node: v1.Node) -> str:
    """`↓11.9Mi/s ↑2.9Mi/s`, `<none>` when never measured."""
    measured = node.status.network.throughput
    if not measured.download and not measured.upload:
        return NONE
    return f"↓{bytes_text(measured.download)}/s ↑{bytes_text(measured.upload)}/s"


# ---- rows ---------------------------------------------------------------------------------------------------


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
        row += [key_values(node.metadata.labels), or_none(node_address(node)), throughput_text(node), heartbeat]
    return row


def project_reason(project: v1.Project) -> v1.Condition | None:
    """The condition explaining a project's state: Scheduled=False while Pending, else the Phase condition."""
    scheduled = meta.get_condition(project.status.conditions, v1.CONDITION_SCHEDULED)
    if project.status.phase == v1.PENDING and scheduled is not None and scheduled.status == v1.FALSE:
        return scheduled
    return meta.get_condition(project.status.conditions, v1.CONDITION_PHASE) or scheduled


def services_ready(project: v1.Project) -> str:
    """`ready/total`: ready services (running, and healthy when they have a health check) over services declared."""
    ready = sum(1 for s in project.status.services if s.ready)
    return f"{ready}/{len(project.spec.services)}"


def restarts(project: v1.Project) -> str:
    """Restarts of all services (by Docker's restart policy and by the agent for failed health checks)."""
    return str(sum(s.restart_count for s in project.status.services))


def project_row(project: v1.Project, ctx: RowContext, wide: bool) -> list[str]:
    row = [
        project.metadata.name,
        or_none(project.status.phase, UNKNOWN),
        or_none(project.status.node_ref),
        services_ready(project),
        restarts(project),
        age(project.metadata.creation_timestamp, ctx.now),
    ]
    if wide:
        cond = project_reason(project)
        hosts = ",".join(
            f"{ingress_host(project, i)}->{i.target.service}:{i.target.port}" for i in project.spec.ingress
        )
        row += [or_none(hosts), or_none(cond.reason if cond else ""), or_none(cond.message if cond else "")]
    return row


def event_last_seen(event: v1.Event) -> float:
    """When an event last happened (its creation when it carries no timestamps)."""
    for ts in (event.spec.last_timestamp, event.spec.first_timestamp, event.metadata.creation_timestamp):
        if ts.seconds or ts.nanos:
            return seconds(ts)
    return 0.0


def involved(event: v1.Event) -> str:
    """`project/web` for the object an event is about."""
    ref = event.spec.involved_object
    return f"{ref.kind.lower()}/{ref.name}"


def event_row(event: v1.Event, ctx: RowContext, wide: bool) -> list[str]:
    spec = event.spec
    last = event_last_seen(event)
    row = [format_duration(ctx.now - last) if last else UNKNOWN, spec.type, spec.reason, involved(event)]
    if wide:
        source = ",".join(p for p in (spec.source.component, spec.source.host) if p)
        first = age(spec.first_timestamp, ctx.now)
        row += [or_none(source), str(max(spec.count, 1)), first, event.metadata.name]
    row.append(spec.message)
    return row


def lease_row(lease: v1.Lease, ctx: RowContext, wide: bool) -> list[str]:
    row = [lease.metadata.name, or_none(lease.spec.holder_identity), age(lease.metadata.creation_timestamp, ctx.now)]
    if wide:
        duration = f"{lease.spec.lease_duration_seconds}s" if lease.spec.lease_duration_seconds else NONE
        row += [duration, age(lease.spec.renew_time, ctx.now), str(lease.spec.lease_transitions)]
    return row


def secret_row(secret: v1.Secret, ctx: RowContext, wide: bool) -> list[str]:
    """Name, type, number of keys, age: never a value."""
    row = [secret.metadata.name, secret.spec.type or v1.SECRET_OPAQUE, str(len(secret.spec.data))]
    row.append(age(secret.metadata.creation_timestamp, ctx.now))
    if wide:
        row.append(", ".join(sorted(secret.spec.data)) or NONE)
    return row


def config_row(config: v1.Config, ctx: RowContext, wide: bool) -> list[str]:
    row = [config.metadata.name, str(len(config.spec.data)), age(config.metadata.creation_timestamp, ctx.now)]
    if wide:
        row.append(", ".join(sorted(config.spec.data)) or NONE)
    return row


@dataclass(frozen=True, slots=True)
class Columns:
    """The table of one kind: headers (plain and wide) and the row function."""

    headers: tuple[str, ...]
    wide_headers: tuple[str, ...]
    row: Callable[[Any, RowContext, bool], list[str]]
    sort_key: Callable[[Any], Any] = meta.name_of

    def header(self, wide: bool) -> list[str]:
        return list(self.wide_headers if wide else self.headers)


COLUMNS: dict[str, Columns] = {
    "nodes": Columns(
        ("NAME", "STATE", "SCHEDULABLE", "CPU", "MEMORY", "PROJECTS", "AGE"),
        ("NAME", "STATE", "SCHEDULABLE", "CPU", "MEMORY", "PROJECTS", "AGE", "LABELS", "ADDRESS", "THROUGHPUT",
         "LAST-HEARTBEAT"),
        node_row,
    ),
    "projects": Columns(
        ("NAME", "PHASE", "NODE", "READY", "RESTARTS", "AGE"),
        ("NAME", "PHASE", "NODE", "READY", "RESTARTS", "AGE", "HOSTS", "REASON", "MESSAGE"),
        project_row,
    ),
    "events": Columns(
        ("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"),
        ("LAST SEEN", "TYPE", "REASON", "OBJECT", "SOURCE", "COUNT", "FIRST SEEN", "NAME", "MESSAGE"),
        event_row,
        sort_key=event_last_seen,
    ),
    "leases": Columns(("NAME", "HOLDER", "AGE"), ("NAME", "HOLDER", "AGE", "DURATION", "RENEWED", "TRANSITIONS"),
                      lease_row),
    "secrets": Columns(("NAME", "TYPE", "DATA", "AGE"), ("NAME", "TYPE", "DATA", "AGE", "KEYS"), secret_row),
    "configs": Columns(("NAME", "DATA", "AGE"), ("NAME", "DATA", "AGE", "KEYS"), config_row),
}


def definition_row(definition: v1.ResourceDefinition, ctx: RowContext, wide: bool) -> list[str]:
    spec = definition.spec
    row = [definition.metadata.name, spec.kind, or_none(",".join(spec.short_names)), age(definition.metadata.creation_timestamp, ctx.now)]
    if wide:
        row += [or_none(",".join(c.name for c in spec.printer_columns)), or_none(",".join(spec.node_verbs))]
    return row


COLUMNS["resourcedefinitions"] = Columns(
    ("NAME", "KIND", "SHORTNAMES", "AGE"), ("NAME", "KIND", "SHORTNAMES", "AGE", "COLUMNS", "NODE-VERBS"), definition_row
)


def json_path_value(obj: Any, path: str) -> str:
    """The value at a printer column's JSON path (`.status.readyReplicas`, `.spec.items[0].name`) in the object's
    JSON form, defaults included; `<none>` when absent."""
    value: Any = json_format.MessageToDict(obj, always_print_fields_with_no_presence=True)
    for part in path.strip(".").split("."):
        name, _, index = part.partition("[")
        value = value.get(name) if isinstance(value, dict) else None
        if index and isinstance(value, list):
            position = int(index.rstrip("]"))
            value = value[position] if position < len(value) else None
        if value is None:
            return NONE
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value).lower() if isinstance(value, bool) else str(value)


def custom_columns(kind: meta.Kind) -> Columns:
    """NAME, the definition's printer columns, AGE (wide: + LABELS) for a custom kind."""
    names = tuple(name for name, _ in kind.printer_columns)

    def row(obj: Any, ctx: RowContext, wide: bool) -> list[str]:
        cells = [obj.metadata.name, *(json_path_value(obj, path) for _, path in kind.printer_columns)]
        cells.append(age(obj.metadata.creation_timestamp, ctx.now))
        return cells + [key_values(obj.metadata.labels)] if wide else cells

    return Columns(("NAME", *names, "AGE"), ("NAME", *names, "AGE", "LABELS"), row)


def columns_of(kind: meta.Kind) -> Columns:
    """The table of `kind`: its own for built-in kinds, from the definition's printer columns for custom kinds."""
    return COLUMNS.get(kind.plural) or custom_columns(kind)


def rows(kind: meta.Kind, objects: Sequence[Any], ctx: RowContext, *, wide: bool) -> list[list[str]]:
    """The rows for `objects` of `kind`, in the kind's order (names; events by time)."""
    columns = columns_of(kind)
    return [columns.row(o, ctx, wide) for o in sorted(objects, key=columns.sort_key)]


__all__ = [
    "COLUMNS",
    "Columns",
    "RowContext",
    "bytes_text",
    "columns_of",
    "custom_columns",
    "config_row",
    "cpu_text",
    "event_last_seen",
    "involved",
    "json_path_value",
    "load_context",
    "node_address",
    "project_reason",
    "rows",
    "secret_row",
    "services_ready",
    "throughput_text",
]
