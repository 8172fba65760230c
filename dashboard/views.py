"""What the dashboard shows, as JSON-ready dicts: pure functions over cached objects and the time `now`.

Every function takes read-only objects (from the informer caches) and returns fresh plain data; nothing here does
I/O, so the pages' content is tested with tables of objects. Times are seconds since the epoch; ages are seconds.

Namespaces: every row of a namespaced kind carries its `namespace`; the list views take `namespace` ("" = every
namespace, the dashboard's default) and keep only that namespace's rows (`in_namespace`), sorted by namespace, then
name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from caravanserai import meta, v1
from caravanserai.client.agentlogs import node_address
from caravanserai.client.nodeops import requested
from caravanserai.client.volumestatus import VolumeReading, freshness, restoring_text, short_id, volume_readings
from caravanserai.clock import seconds
from caravanserai.project import readiness
from caravanserai.project.ingresshosts import ingress_host
from caravanserai.project.replicas import owning_set
from caravanserai.text import manifest
from caravanserai.text.quantity import parse_quantity
from caravanserai.text.selectors import LabelSelector

Json = dict[str, Any]


def in_namespace(obj: Any, namespace: str) -> bool:
    """Whether `obj` is shown when the picker says `namespace` ("" = every namespace; a cluster-wide object, whose
    namespace is "", only then)."""
    return not namespace or meta.namespace_of(obj) == namespace


def by_key(obj: Any) -> tuple[str, str]:
    """The order of rows: namespace, then name."""
    return meta.namespace_of(obj), obj.metadata.name


def age(ts: Any, now: float) -> float | None:
    """Seconds from the time `ts` to `now` (None when `ts` is not set)."""
    when = seconds(ts)
    return max(0.0, now - when) if when else None


def _number(value: Decimal) -> float:
    return float(value)


def _resources(node: v1.Node, bound: Sequence[v1.Project]) -> list[Json]:
    """Allocatable vs requested per resource, as numbers in base units (cpu in cores, memory in bytes)."""
    taken = requested(bound)
    rows = []
    for name in sorted(set(node.status.allocatable) | set(taken)):
        try:
            allocatable = _number(parse_quantity(node.status.allocatable.get(name, "0")))
        except ValueError:
            allocatable = 0.0
        rows.append({"name": name, "allocatable": allocatable, "requested": _number(taken.get(name, Decimal(0)))})
    return rows


def node_view(node: v1.Node, lease: v1.Lease | None, bound: Sequence[v1.Project], now: float) -> Json:
    """One node of the cluster page: state, schedulable, lease age, resources, its projects."""
    renew = lease.spec.renew_time if lease is not None else None
    return {
        "name": node.metadata.name,
        "state": node.status.state or "Unknown",
        "schedulable": not node.spec.unschedulable,
        "leaseAge": age(renew, now) if renew is not None else None,
        "address": node_address(node),
        "resources": _resources(node, bound),
        "projects": sorted(p.metadata.name for p in bound),
        "projectRefs": [
            {"namespace": meta.namespace_of(p), "name": p.metadata.name} for p in sorted(bound, key=by_key)
        ],
        "labels": dict(node.metadata.labels),
    }


def _decision(decision: v1.ScalingDecision, now: float) -> Json | None:
    if not decision.HasField("time"):
        return None
    return {
        "from": decision.from_size,
        "to": decision.to_size,
        "reason": decision.reason,
        "age": age(decision.time, now),
    }


def group_view(group: v1.NodeGroup, now: float) -> Json:
    """One node group of the cluster page: sizes and the autoscaler's last decisions."""
    status = group.status
    return {
        "name": group.metadata.name,
        "min": group.spec.min_size,
        "max": group.spec.max_size,
        "desired": status.desired,
        "current": status.current,
        "provisioning": [p.name for p in status.provisioning],
        "removing": status.removing.node if status.HasField("removing") else "",
        "lastScaleUp": _decision(status.last_scale_up, now),
        "lastScaleDown": _decision(status.last_scale_down, now),
    }


def cluster_view(
    nodes: Iterable[v1.Node],
    leases: Iterable[v1.Lease],
    projects: Iterable[v1.Project],
    now: float,
    groups: Iterable[v1.NodeGroup] = (),
) -> Json:
    """The cluster page: every node (by name) with what is bound to it, the phase counts of all projects, and the
    node groups with the autoscaler's decisions."""
    by_node: dict[str, list[v1.Project]] = {}
    phases: dict[str, int] = {}
    for project in projects:
        phases[project.status.phase or "Unknown"] = phases.get(project.status.phase or "Unknown", 0) + 1
        if project.status.node_ref and project.status.phase in v1.BOUND_PHASES:
            by_node.setdefault(project.status.node_ref, []).append(project)
    lease_of = {lease.metadata.name: lease for lease in leases}
    rows = [
        node_view(node, lease_of.get(node.metadata.name), by_node.get(node.metadata.name, []), now)
        for node in sorted(nodes, key=lambda n: n.metadata.name)
    ]
    views = [group_view(g, now) for g in sorted(groups, key=lambda g: g.metadata.name)]
    return {"nodes": rows, "phases": phases, "groups": views, "now": now}


def pending_reason(project: v1.Project) -> Json | None:
    """Why a project is where it is: the Scheduled=False condition of a Pending project (Unschedulable and its
    message), else the Phase condition; None when it has neither."""
    scheduled = meta.get_condition(project.status.conditions, v1.CONDITION_SCHEDULED)
    condition = (
        scheduled
        if (project.status.phase == v1.PENDING and scheduled is not None and scheduled.status == v1.FALSE)
        else None
    )
    condition = condition or meta.get_condition(project.status.conditions, v1.CONDITION_PHASE) or scheduled
    if condition is None or not (condition.reason or condition.message):
        return None
    return {"reason": condition.reason, "message": condition.message}


def project_row(project: v1.Project, now: float) -> Json:
    """One row of the projects page."""
    ready, total = readiness.ready_services(project)
    return {
        "name": project.metadata.name,
        "namespace": meta.namespace_of(project),
        "phase": project.status.phase or "Unknown",
        "node": project.status.node_ref,
        "ready": f"{ready}/{total}",
        "restarts": sum(s.restart_count for s in project.status.services),
        "age": age(project.metadata.creation_timestamp, now),
        "labels": dict(project.metadata.labels),
        "reason": pending_reason(project),
        "projectset": owning_set(project) or "",
    }


def projects_view(
    projects: Iterable[v1.Project], now: float, *, label: str = "", phase: str = "", namespace: str = ""
) -> Json:
    """The projects page, filtered by a label selector (`app=web,tier!=db`), a phase and a namespace ("" = every
    one); Invalid for a bad selector."""
    selector = LabelSelector.parse(label)
    rows = [
        project_row(p, now)
        for p in sorted(projects, key=by_key)
        if selector.matches(p.metadata.labels) and (not phase or p.status.phase == phase) and in_namespace(p, namespace)
    ]
    return {"projects": rows, "now": now}


def event_row(event: v1.Event, now: float) -> Json:
    spec = event.spec
    last = seconds(spec.last_timestamp) or seconds(spec.first_timestamp) or seconds(event.metadata.creation_timestamp)
    ref = spec.involved_object
    return {
        "name": event.metadata.name,
        "namespace": meta.namespace_of(event),
        "type": spec.type,
        "reason": spec.reason,
        "object": f"{ref.kind.lower()}/{ref.name}",
        "message": spec.message,
        "count": max(spec.count, 1),
        "source": ",".join(p for p in (spec.source.component, spec.source.host) if p),
        "lastSeen": last,
        "age": max(0.0, now - last) if last else None,
    }


def events_view(
    events: Iterable[v1.Event], now: float, *, type_: str = "", obj: str = "", limit: int = 500, namespace: str = ""
) -> Json:
    """Events, newest first, filtered by type (Normal, Warning), involved object (`project/web`) and namespace."""
    rows = [event_row(e, now) for e in events if in_namespace(e, namespace)]
    rows = [r for r in rows if (not type_ or r["type"] == type_) and (not obj or r["object"] == obj.lower())]
    rows.sort(key=lambda r: r["lastSeen"] or 0.0, reverse=True)
    return {"events": rows[:limit], "now": now}


def _urls(project: v1.Project, node: v1.Node | None) -> list[str]:
    """Where a project answers: its ingress host names (on the port of the node's ingress proxy; every node's
    proxy serves every host), and the host ports its services publish on its node."""
    proxy = node.status.network.ingress_port if node is not None else 0
    suffix = f":{proxy}" if proxy else ""
    urls = [f"http://{ingress_host(project, ingress)}{suffix}/" for ingress in project.spec.ingress]
    address = node_address(node) if node is not None else ""
    for service in project.spec.services:
        for port in service.ports:
            if port.host_port and (port.protocol or "tcp").lower() == "tcp":
                host = port.host_ip if port.host_ip not in ("", "0.0.0.0", "::") else address or "127.0.0.1"
                urls.append(f"http://{host}:{port.host_port}/")
    return urls


def volume_view(reading: VolumeReading) -> Json:
    """One volume of the project page: its type, backup repository and `every`, the last backup's age (seconds;
    None before the first) against `every` (seconds), overdue, a restore in progress, the last error and what
    the copy came from; `summary` is the line `caractrl describe` shows (`last backup 2m ago (every 5m)`)."""
    spec, status = reading.spec, reading.status
    restore = reading.restoring
    return {
        "name": reading.name,
        "type": (spec.type or "Ephemeral") if spec is not None else "",
        "backedUp": reading.backed_up,
        "repository": spec.backup.repository if spec is not None else "",
        "every": spec.backup.every if spec is not None else "",
        "everySeconds": reading.every,
        "lastBackupAge": reading.backup_age,
        "lastSnapshot": short_id(status.last_backup.id) if status is not None else "",
        "overdue": reading.overdue,
        "restoring": None
        if restore is None
        else {
            "snapshot": short_id(restore.snapshot.id),
            "bytesDone": restore.bytes_done,
            "bytesTotal": restore.bytes_total,
            "text": restoring_text(restore),
        },
        "lastError": status.last_error if status is not None else "",
        "message": status.message if status is not None else "",
        "summary": freshness(reading),
    }


def conditions_view(conditions: Iterable[v1.Condition], now: float) -> list[Json]:
    """An object's conditions: type, status, reason, message and the age of the last transition."""
    return [
        {
            "type": c.type,
            "status": c.status,
            "reason": c.reason,
            "message": c.message,
            "age": age(c.last_transition_time, now),
        }
        for c in conditions
    ]


def about_object(event: v1.Event, kind: str, obj: Any) -> bool:
    """Whether `event` is about `obj` of `kind` (by kind, namespace and name: two namespaces' objects of one name
    have their own events; an event that names no namespace is about an object of `default`)."""
    ref = event.spec.involved_object
    namespace = ref.namespace or meta.namespace_of(event) or meta.DEFAULT_NAMESPACE
    wanted = meta.namespace_of(obj) or meta.DEFAULT_NAMESPACE
    return ref.kind == kind and ref.name == obj.metadata.name and namespace == wanted


def project_view(project: v1.Project, node: v1.Node | None, events: Iterable[v1.Event], now: float) -> Json:
    """The project page: its row, conditions, per-service status, volume data, URLs and the events about it."""
    statuses = {s.name: s for s in project.status.services}
    services = []
    for service in project.spec.services:
        status = statuses.get(service.name)
        services.append(
            {
                "name": service.name,
                "image": service.image,
                "state": status.state if status is not None else "",
                "ready": bool(status is not None and status.ready),
                "restarts": status.restart_count if status is not None else 0,
                "exitCode": status.exit_code if status is not None else 0,
                "message": status.message if status is not None else "",
            }
        )
    about = [e for e in events if about_object(e, "Project", project)]
    return {
        **project_row(project, now),
        "conditions": conditions_view(project.status.conditions, now),
        "services": services,
        "volumes": [volume_view(r) for r in volume_readings(project, now)],
        "urls": _urls(project, node),
        "events": events_view(about, now)["events"],
        "now": now,
    }


# ---- any kind ------------------------------------------------------------------------------------------------


def printer_columns(kind: meta.Kind) -> list[tuple[str, str]]:
    """(header, JSON path) of the extra columns a kind's table row offers (`printer_columns` of the kind table,
    e.g. from a ResourceDefinition's additionalPrinterColumns); none when the kind declares none."""
    columns = getattr(kind, "printer_columns", ()) or ()
    out = []
    for column in columns:
        name = getattr(column, "name", None)
        path = getattr(column, "json_path", None)
        if name is None and isinstance(column, Sequence) and len(column) == 2:
            name, path = column
        if name and path:
            out.append((str(name), str(path)))
    return out


def json_path(data: Any, path: str) -> Any:
    """The value at a simple JSON path (`.status.readyReplicas`, `.spec.services[0].name`); None when absent."""
    current = data
    for part in path.strip().lstrip("$").lstrip(".").replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("[") and part.endswith("]"):
            index = part[1:-1]
            if not (isinstance(current, list) and index.isdigit() and int(index) < len(current)):
                return None
            current = current[int(index)]
        elif isinstance(current, Mapping) and part in current:
            current = current[part]
        else:
            return None
    return current


def kinds_view(kinds: Iterable[meta.Kind]) -> Json:
    """The kinds the dashboard knows (those of the client's kind table)."""
    return {
        "kinds": [
            {
                "plural": k.plural,
                "kind": k.kind,
                "shortNames": list(k.short_names),
                "columns": [name for name, _ in printer_columns(k)],
            }
            for k in sorted(kinds, key=lambda k: k.plural)
        ]
    }


def kind_table(kind: meta.Kind, objects: Iterable[Any], now: float, *, namespace: str = "") -> Json:
    """Any kind as a table: NAME, the kind's printer columns, AGE; each row also carries its namespace and the object
    as JSON. `namespace` keeps a namespaced kind's rows of that namespace (a cluster-wide kind's are all shown)."""
    columns = printer_columns(kind)
    rows = []
    cluster_scoped = getattr(kind, "cluster_scoped", True)  # meta.Kind's default, for stand-ins that lack it
    shown = objects if cluster_scoped else (o for o in objects if in_namespace(o, namespace))
    for obj in sorted(shown, key=by_key):
        data = manifest.to_dict(obj)
        cells = [json_path(data, path) for _, path in columns]
        rows.append(
            {
                "name": obj.metadata.name,
                "namespace": meta.namespace_of(obj),
                "cells": cells,
                "age": age(obj.metadata.creation_timestamp, now),
                "object": data,
            }
        )
    return {
        "kind": kind.kind,
        "plural": kind.plural,
        "namespaced": not cluster_scoped,
        "columns": [name for name, _ in columns],
        "rows": rows,
        "now": now,
    }


__all__ = [
    "Json",
    "about_object",
    "age",
    "by_key",
    "cluster_view",
    "conditions_view",
    "group_view",
    "in_namespace",
    "event_row",
    "events_view",
    "json_path",
    "kind_table",
    "kinds_view",
    "node_view",
    "pending_reason",
    "printer_columns",
    "project_row",
    "project_view",
    "projects_view",
    "volume_view",
]
