"""The text layout of `caractrl describe`: aligned `Key:  value` blocks, indented sections and small tables.

Name:          web
Phase:         Pending
Spec:
  Priority:    0
Conditions:
  TYPE        STATUS   REASON          MESSAGE                       AGE
  Scheduled   False    Unschedulable   0/3 nodes are available: …    5s
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from caravanserai import meta, v1
from caravanserai.cli.printers import NONE, UNKNOWN, age, key_values, render_table, when
from caravanserai.cli.tables import event_last_seen
from caravanserai.text.durations import format_duration

INDENT = "  "
# Annotations describe hides: machinery, not information (shown by `get -o yaml`).
HIDDEN_ANNOTATIONS = ("caravanserai.io/last-applied-configuration",)


class Writer:
    """Collects the lines of one description."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def fields(self, pairs: Sequence[tuple[str, str]], level: int = 0) -> None:
        """`Key:  value` lines with the values aligned; multi-line values continue under the value column."""
        width = max((len(k) for k, _ in pairs), default=0) + 2
        for key, value in pairs:
            first, *rest = (value or "").split("\n") or [""]
            self.lines.append(f"{INDENT * level}{(key + ':').ljust(width)} {first}".rstrip())
            self.lines.extend(f"{INDENT * level}{' ' * (width + 1)}{line}".rstrip() for line in rest)

    def heading(self, title: str, level: int = 0, value: str = "") -> None:
        self.lines.append(f"{INDENT * level}{title}:{(' ' + value) if value else ''}")

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]], level: int = 1) -> None:
        """A table under the current heading, or `<none>` when it has no rows."""
        if not rows:
            self.lines.append(f"{INDENT * level}{NONE}")
            return
        self.lines.extend(f"{INDENT * level}{line}" for line in render_table(headers, rows))

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def listing(items: Iterable[str]) -> str:
    """Items one per line (aligned under the value column by `Writer.fields`), `<none>` when empty."""
    return "\n".join(items) or NONE


def metadata_fields(obj: Any, now: float) -> list[tuple[str, str]]:
    """The ObjectMeta fields every description shows after the name (`Namespace` first, for an object that has one:
    every object of a namespaced kind)."""
    m = obj.metadata
    annotations = {k: v for k, v in m.annotations.items() if k not in HIDDEN_ANNOTATIONS}
    pairs = [("Namespace", m.namespace)] if m.namespace else []
    pairs += [
        ("Labels", listing(f"{k}={v}" for k, v in sorted(m.labels.items()))),
        ("Annotations", listing(f"{k}: {v}" for k, v in sorted(annotations.items()))),
        ("Created", when(m.creation_timestamp, now)),
    ]
    if m.HasField("deletion_timestamp"):
        pairs.append(("Deletion Requested", when(m.deletion_timestamp, now)))
    if m.owner_references:
        pairs.append(("Owners", listing(owner_text(ref) for ref in m.owner_references)))
    pairs += [
        ("Finalizers", ", ".join(m.finalizers) or NONE),
        ("UID", m.uid or NONE),
        ("Resource Version", m.resource_version or NONE),
        ("Generation", str(m.generation)),
    ]
    return pairs


def owner_text(ref: v1.OwnerReference) -> str:
    """`WebFarm/web (example.com/v1, uid …, controller, blockOwnerDeletion)`: one owner reference."""
    details = [ref.api_version or NONE, f"uid {ref.uid or NONE}"]
    details += [
        flag for flag, on in (("controller", ref.controller), ("blockOwnerDeletion", ref.block_owner_deletion)) if on
    ]
    return f"{ref.kind}/{ref.name} ({', '.join(details)})"


def condition_rows(conditions: Iterable[v1.Condition], now: float) -> list[list[str]]:
    """TYPE STATUS REASON MESSAGE AGE HEARTBEAT rows (AGE: since the last transition)."""
    return [
        [
            c.type,
            c.status,
            c.reason or NONE,
            c.message or NONE,
            age(c.last_transition_time, now),
            age(c.last_heartbeat_time, now),
        ]
        for c in conditions
    ]


CONDITION_HEADERS = ("TYPE", "STATUS", "REASON", "MESSAGE", "AGE", "HEARTBEAT")


def write_conditions(out: Writer, conditions: Sequence[v1.Condition], now: float) -> None:
    out.heading("Conditions")
    out.table(CONDITION_HEADERS, condition_rows(conditions, now))


def events_about(events: Iterable[v1.Event], obj: Any) -> list[v1.Event]:
    """The events whose involved object is `obj` (kind, namespace and name; uid too when both carry one), oldest
    first. An event naming no namespace is about a cluster-wide object or one of `default` (events written before
    namespaces existed)."""
    kind = meta.kind_of(obj).kind
    name, uid = obj.metadata.name, obj.metadata.uid
    namespace = obj.metadata.namespace or meta.DEFAULT_NAMESPACE
    chosen = [
        e
        for e in events
        if e.spec.involved_object.kind == kind
        and e.spec.involved_object.name == name
        and (e.spec.involved_object.namespace or meta.DEFAULT_NAMESPACE) == namespace
        and (not uid or not e.spec.involved_object.uid or e.spec.involved_object.uid == uid)
    ]
    return sorted(chosen, key=event_last_seen)


def write_events(out: Writer, events: Sequence[v1.Event], now: float) -> None:
    """kubectl's Events block: LAST SEEN (with the count), TYPE, REASON, FROM, MESSAGE."""
    out.heading("Events")
    rows = []
    for event in events:
        spec = event.spec
        last = event_last_seen(event)
        seen = format_duration(now - last) if last else UNKNOWN
        if spec.count > 1:
            seen += f" (x{spec.count} over {age(spec.first_timestamp, now)})"
        source = "/".join(p for p in (spec.source.component, spec.source.host) if p) or NONE
        rows.append([seen, spec.type, spec.reason, source, spec.message])
    out.table(("LAST SEEN", "TYPE", "REASON", "FROM", "MESSAGE"), rows)


def quantities(values: Mapping[str, str]) -> str:
    """`cpu=500m, memory=1Gi` or `<none>`."""
    return key_values(values, sep=", ")


__all__ = [
    "CONDITION_HEADERS",
    "HIDDEN_ANNOTATIONS",
    "Writer",
    "condition_rows",
    "events_about",
    "listing",
    "metadata_fields",
    "owner_text",
    "quantities",
    "write_conditions",
    "write_events",
]
