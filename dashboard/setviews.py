"""The dashboard's ProjectSet pages, as JSON-ready dicts: pure functions over cached objects and the time `now`
(as `caravanserai.dashboard.views`, whose row, condition and event helpers they reuse).

* The list (`projectsets_view`): per set, its replicas desired/ready/updated/available (the status the controller
  wrote), the revision being rolled out with its number, paused, and the Progressing condition (a failed rollout
  shows as False, ProgressDeadlineExceeded).
* A set (`projectset_view`): the row, its strategy with the bounds it comes to, its disruption budget, every
  condition, the revisions it keeps (with their roles: current, update), its replicas — the projects it controls,
  by owner uid, with their revision, phase, node and readiness — and the events about it.
"""

from __future__ import annotations

from collections.abc import Iterable

from caravanserai import meta, v1
from caravanserai.dashboard.views import (
    Json,
    about_object,
    age,
    by_key,
    conditions_view,
    events_view,
    in_namespace,
    project_row,
)
from caravanserai.project import replicas


def projectset_row(projectset: v1.ProjectSet, now: float) -> Json:
    """One row of the ProjectSets page."""
    spec, status = projectset.spec, projectset.status
    progressing = meta.get_condition(status.conditions, v1.CONDITION_PROGRESSING)
    return {
        "name": projectset.metadata.name,
        "namespace": meta.namespace_of(projectset),
        "desired": replicas.replicas_of(spec),
        "replicas": status.replicas,
        "ready": status.ready_replicas,
        "updated": status.updated_replicas,
        "available": status.available_replicas,
        "revision": replicas.revision_number(status.revisions, status.update_revision),
        "updateRevision": status.update_revision,
        "currentRevision": status.current_revision,
        "paused": spec.paused,
        "condition": None
        if progressing is None
        else {
            "type": progressing.type,
            "status": progressing.status,
            "reason": progressing.reason,
            "message": progressing.message,
        },
        "age": age(projectset.metadata.creation_timestamp, now),
        "labels": dict(projectset.metadata.labels),
    }


def projectsets_view(projectsets: Iterable[v1.ProjectSet], now: float, *, namespace: str = "") -> Json:
    """The ProjectSets page: every set of `namespace` ("" = every namespace), by namespace and name."""
    rows = [projectset_row(s, now) for s in sorted(projectsets, key=by_key) if in_namespace(s, namespace)]
    return {"projectsets": rows, "now": now}


def _strategy(spec: v1.ProjectSetSpec) -> Json:
    if spec.strategy.type == v1.RECREATE:
        return {"type": v1.RECREATE}
    rolling, bounds = spec.strategy.rolling_update, replicas.rolling_bounds(spec)
    return {
        "type": v1.ROLLING_UPDATE,
        "maxSurge": rolling.max_surge or replicas.DEFAULT_SURGE,
        "maxUnavailable": rolling.max_unavailable or replicas.DEFAULT_UNAVAILABLE,
        "surge": bounds.surge,
        "unavailable": bounds.unavailable,
    }


def _budget(projectset: v1.ProjectSet) -> Json | None:
    budget = projectset.spec.disruption_budget
    if not (budget.min_available or budget.max_unavailable):
        return None
    return {
        "minAvailable": budget.min_available,
        "maxUnavailable": budget.max_unavailable,
        "disruptionsAllowed": projectset.status.disruptions_allowed,
    }


def _revisions(status: v1.ProjectSetStatus, now: float) -> list[Json]:
    rows = []
    for revision in status.revisions:
        roles = (("current", status.current_revision), ("update", status.update_revision))
        rows.append(
            {
                "revision": revision.revision,
                "hash": revision.hash,
                "roles": [role for role, hash_ in roles if hash_ == revision.hash],
                "age": age(revision.created, now),
            }
        )
    return rows


def controlled(projectset: v1.ProjectSet, projects: Iterable[v1.Project]) -> list[v1.Project]:
    """The projects `projectset` controls (its name and uid: a replica of an older set of that name is not)."""
    uid = projectset.metadata.uid
    return [
        p
        for p in projects
        if replicas.owning_set(p) == projectset.metadata.name
        and (owner := meta.controller_of(p)) is not None
        and owner.uid == uid
    ]


def projectset_view(
    projectset: v1.ProjectSet, projects: Iterable[v1.Project], events: Iterable[v1.Event], now: float
) -> Json:
    """The page of one set (module docstring)."""
    spec = projectset.spec
    owned = sorted(controlled(projectset, projects), key=lambda p: p.metadata.name)
    about = [e for e in events if about_object(e, replicas.SET_KIND, projectset)]
    return {
        **projectset_row(projectset, now),
        "selector": dict(spec.selector.match_labels),
        "strategy": _strategy(spec),
        "minReadySeconds": spec.min_ready_seconds,
        "progressDeadlineSeconds": spec.progress_deadline_seconds,
        "disruptionBudget": _budget(projectset),
        "conditions": conditions_view(projectset.status.conditions, now),
        "revisions": _revisions(projectset.status, now),
        "projects": [
            {**project_row(p, now), "revision": p.metadata.labels.get(v1.TEMPLATE_HASH_LABEL, "")} for p in owned
        ],
        "events": events_view(about, now)["events"],
        "now": now,
    }


__all__ = ["controlled", "projectset_row", "projectset_view", "projectsets_view"]
