"""ProjectSets in caractrl: the `get` table (as kubectl's for Deployments), the `describe` layout (strategy,
revisions, conditions and the replicas with their revision and node), `wait --for` on the replica counts, and
the schema of a set manifest.

    NAME READY UP-TO-DATE AVAILABLE AGE   (wide: + STRATEGY REVISION SELECTOR)
"""

from __future__ import annotations

from collections.abc import Sequence

from caravanserai import v1
from caravanserai.cli.kinds.base import KindView, SchemaBits
from caravanserai.cli.layout import Writer, metadata_fields, write_conditions, write_events
from caravanserai.cli.printers import NONE, age, or_none
from caravanserai.cli.tables import Columns, RowContext, services_ready
from caravanserai.client import Client
from caravanserai.errors import Forbidden
from caravanserai.project import replicas
from caravanserai.project.affinity import selector_of

HEADERS = ("NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE")


def set_row(projectset: v1.ProjectSet, ctx: RowContext, wide: bool) -> list[str]:
    """Name, ready/desired, updated, available, age (wide: + strategy, update revision, selector)."""
    status = projectset.status
    desired = replicas.replicas_of(projectset.spec)
    row = [
        projectset.metadata.name,
        f"{status.ready_replicas}/{desired}",
        str(status.updated_replicas),
        str(status.available_replicas),
        age(projectset.metadata.creation_timestamp, ctx.now),
    ]
    if wide:
        strategy = projectset.spec.strategy.type or v1.ROLLING_UPDATE
        row += [strategy, or_none(status.update_revision), str(selector_of(projectset.spec.selector))]
    return row


def _strategy_text(spec: v1.ProjectSetSpec) -> str:
    if spec.strategy.type == v1.RECREATE:
        return v1.RECREATE
    bounds = replicas.rolling_bounds(spec)
    rolling = spec.strategy.rolling_update
    return (
        f"RollingUpdate (maxSurge {rolling.max_surge or replicas.DEFAULT_SURGE} = {bounds.surge}, "
        f"maxUnavailable {rolling.max_unavailable or replicas.DEFAULT_UNAVAILABLE} = {bounds.unavailable})"
    )


def _budget_text(spec: v1.ProjectSetSpec, status: v1.ProjectSetStatus) -> str:
    budget = spec.disruption_budget
    if budget.min_available:
        return f"minAvailable {budget.min_available} ({status.disruptions_allowed} disruptions allowed)"
    if budget.max_unavailable:
        return f"maxUnavailable {budget.max_unavailable} ({status.disruptions_allowed} disruptions allowed)"
    return NONE


def _revision_rows(status: v1.ProjectSetStatus) -> list[list[str]]:
    rows = []
    for revision in status.revisions:
        roles = (("current", status.current_revision), ("update", status.update_revision))
        marks = [role for role, hash_ in roles if hash_ == revision.hash]
        rows.append([str(revision.revision), revision.hash, ",".join(marks) or NONE])
    return rows


def describe_set(
    projectset: v1.ProjectSet, events: Sequence[v1.Event], now: float, *, projects: Sequence[v1.Project] | None
) -> str:
    """Replicas, strategy, budget, metadata, revisions, conditions, the replicas (`projects` None: unreadable),
    events."""
    spec, status = projectset.spec, projectset.status
    desired = replicas.replicas_of(spec)
    out = Writer()
    counts = (
        f"{desired} desired | {status.updated_replicas} updated | {status.replicas} total | "
        f"{status.available_replicas} available | {status.unavailable_replicas} unavailable"
    )
    out.fields(
        [
            ("Name", projectset.metadata.name),
            ("Kind", "ProjectSet"),
            ("Selector", str(selector_of(spec.selector))),
            ("Replicas", counts),
            ("Strategy", _strategy_text(spec)),
            ("MinReadySeconds", str(spec.min_ready_seconds)),
            ("ProgressDeadline", f"{spec.progress_deadline_seconds}s"),
            ("Paused", "true" if spec.paused else "false"),
            ("DisruptionBudget", _budget_text(spec, status)),
            *metadata_fields(projectset, now),
        ]
    )
    out.heading("Revisions")
    out.table(("REVISION", "HASH", "ROLE"), _revision_rows(status))
    write_conditions(out, status.conditions, now)
    if projects is None:
        out.heading("Replicas", value="<unknown: projects cannot be read>")
    else:
        rows = [
            [
                p.metadata.name,
                or_none(p.metadata.labels.get(v1.TEMPLATE_HASH_LABEL, "")),
                or_none(p.status.phase),
                or_none(p.status.node_ref),
                services_ready(p),
            ]
            for p in projects
            if replicas.owning_set(p) == projectset.metadata.name
        ]
        out.heading("Replicas")
        out.table(("PROJECT", "REVISION", "PHASE", "NODE", "READY"), rows)
    write_events(out, events, now)
    return out.text()


async def describe(client: Client, projectset: v1.ProjectSet, events: Sequence[v1.Event], now: float) -> str:
    try:
        projects: list[v1.Project] | None = list(await client.projects.list(namespace=projectset.metadata.namespace))
    except Forbidden:
        projects = None
    return describe_set(projectset, events, now, projects=projects)


VIEW = KindView(
    "projectsets",
    Columns(HEADERS, (*HEADERS, "STRATEGY", "REVISION", "SELECTOR"), set_row),
    describe=describe,
    wait_fields={
        "readyReplicas": lambda s: str(s.status.ready_replicas),
        "updatedReplicas": lambda s: str(s.status.updated_replicas),
        "availableReplicas": lambda s: str(s.status.available_replicas),
    },
    waitable=True,
    deletable=True,
    schema=SchemaBits(
        top_required=("spec",),
        required={"ProjectSetSpec": ("selector", "template"), "ProjectTemplate": ("spec",)},
    ),
)

__all__ = ["HEADERS", "VIEW", "describe", "describe_set", "set_row"]
