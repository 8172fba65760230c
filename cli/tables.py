"""The pieces of `caractrl get` tables (`-o table` and `-o wide`): `Columns` (one kind's table), `RowContext`
(what rows may look up besides their own object), quantities for people, and the readings of a project or an
event that tables and descriptions share.

Each kind's columns are in its entry of the CLI's kind table (`cli/kinds/`); a custom kind's table is made here
from its definition's printer columns (`custom_columns`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format

from caravanserai import meta, v1
from caravanserai.cli.printers import NONE, age, key_values
from caravanserai.clock import seconds
from caravanserai.project import readiness
from caravanserai.text.quantity import cpu_millis, format_bytes, format_cpu, to_int


@dataclass
class RowContext:
    """What rows of one table may look up besides their own object (a kind's `lookups` fill it once per table:
    node rows count the projects bound to each node and read its heartbeat Lease)."""

    now: float = field(default_factory=time.time)
    projects_per_node: Counter[str] = field(default_factory=Counter)
    leases: dict[str, v1.Lease] = field(default_factory=dict)


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


# ---- readings that rows and descriptions share ------------------------------------------------------------


def project_reason(project: v1.Project) -> v1.Condition | None:
    """The condition explaining a project's state: Scheduled=False while Pending, else the Phase condition."""
    scheduled = meta.get_condition(project.status.conditions, v1.CONDITION_SCHEDULED)
    if project.status.phase == v1.PENDING and scheduled is not None and scheduled.status == v1.FALSE:
        return scheduled
    return meta.get_condition(project.status.conditions, v1.CONDITION_PHASE) or scheduled


def services_ready(project: v1.Project) -> str:
    """`ready/total`: services that count as ready (running, and healthy when they have a health check; or
    completed jobs: `readiness.counts_as_ready`) over services declared."""
    ready, total = readiness.ready_services(project)
    return f"{ready}/{total}"


def restarts(project: v1.Project) -> str:
    """Restarts of all services (by Docker's restart policy and by the agent for failed health checks)."""
    return str(sum(s.restart_count for s in project.status.services))


def event_last_seen(event: v1.Event) -> float:
    """When an event last happened (its creation when it carries no timestamps)."""
    for ts in (event.spec.last_timestamp, event.spec.first_timestamp, event.metadata.creation_timestamp):
        if ts.seconds or ts.nanos:
            return seconds(ts)
    return 0.0


@dataclass(frozen=True, slots=True)
class Columns:
    """The table of one kind: headers (plain and wide) and the row function."""

    headers: tuple[str, ...]
    wide_headers: tuple[str, ...]
    row: Callable[[Any, RowContext, bool], list[str]]
    sort_key: Callable[[Any], Any] = meta.name_of

    def header(self, wide: bool) -> list[str]:
        return list(self.wide_headers if wide else self.headers)

    def with_namespace(self) -> Columns:
        """This table with a NAMESPACE column first, sorted by namespace first (`get -A`, as kubectl shows it)."""
        row, key = self.row, self.sort_key

        def namespaced_row(obj: Any, ctx: RowContext, wide: bool) -> list[str]:
            return [meta.namespace_of(obj), *row(obj, ctx, wide)]

        return Columns(
            ("NAMESPACE", *self.headers),
            ("NAMESPACE", *self.wide_headers),
            namespaced_row,
            lambda obj: (meta.namespace_of(obj), key(obj)),
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
        return [*cells, key_values(obj.metadata.labels)] if wide else cells

    return Columns(("NAME", *names, "AGE"), ("NAME", *names, "AGE", "LABELS"), row)


__all__ = [
    "Columns",
    "RowContext",
    "bytes_text",
    "cpu_text",
    "custom_columns",
    "event_last_seen",
    "json_path_value",
    "project_reason",
    "restarts",
    "services_ready",
]
