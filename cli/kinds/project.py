"""Projects in caractrl: the `get` table, the `describe` layout (with the node that serves its ingress), `wait
--for phase=PHASE` and the schema of a project manifest.

    NAME PHASE NODE READY RESTARTS AGE   (wide: + HOSTS REASON MESSAGE)
"""

from __future__ import annotations

from collections.abc import Sequence

from caravanserai import meta, v1
from caravanserai.cli.describe_project import describe_project
from caravanserai.cli.kinds.base import Condition, KindView, SchemaBits
from caravanserai.cli.printers import UNKNOWN, age, or_none
from caravanserai.cli.tables import Columns, RowContext, project_reason, restarts, services_ready
from caravanserai.client import Client
from caravanserai.client.apply import modify
from caravanserai.errors import Forbidden, NotFound
from caravanserai.project import lifecycle, nodenames
from caravanserai.project.ingresshosts import ingress_host

_FINAL_PHASES = (v1.SUCCEEDED, v1.FAILED, v1.TERMINATED)


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


async def describe(client: Client, project: v1.Project, events: Sequence[v1.Event], now: float) -> str:
    return describe_project(project, events, now, node=await _node_of(client, project))


async def _node_of(client: Client, project: v1.Project) -> v1.Node | None:
    """The project's node (None when it has none or it cannot be read)."""
    if not project.status.node_ref or not project.spec.ingress:
        return None
    try:
        return await client.nodes.get(project.status.node_ref)
    except (NotFound, Forbidden):
        return None


def hopeless(project: v1.Project, conditions: Sequence[Condition]) -> str | None:
    """Why waiting is pointless (the project reached a final phase the conditions do not ask for), or None."""
    if project.status.phase not in _FINAL_PHASES:
        return None
    if project.status.phase != v1.TERMINATED and 0 < project.status.observed_generation < project.metadata.generation:
        return None  # a changed spec (or a restart) returns a finished project to Pending
    phase = project.status.phase.lower()
    if any(c.wants_absent or (c.field == "phase" and c.value.lower() == phase) for c in conditions):
        return None
    cond = meta.get_condition(project.status.conditions, v1.CONDITION_PHASE)
    detail = f": {cond.reason}: {cond.message}" if cond and (cond.reason or cond.message) else ""
    return f"project/{project.metadata.name} is {project.status.phase}{detail}"


async def with_volumes(client: Client, name: str, *, on: bool = True) -> str | None:
    """Mark project `name` (`lifecycle.DELETE_VOLUMES`) so that the agent terminating it removes its Persistent
    volumes; a warning when no agent will (the project is not bound: its record goes at once). `on=False` takes
    the mark back (the Delete that was to follow failed)."""

    def mark(project: v1.Project) -> bool:
        if lifecycle.deletes_volumes(project) == on:
            return False
        if on:
            project.metadata.annotations[lifecycle.DELETE_VOLUMES] = "true"
        else:
            del project.metadata.annotations[lifecycle.DELETE_VOLUMES]
        return True

    project, _ = await modify(client.projects, name, mark)
    persistent = [v.name for v in project.spec.volumes if v.type == v1.VOLUME_PERSISTENT]
    if on and persistent and project.status.phase in lifecycle.DELETE_AT_ONCE:
        return (
            f"warning: project/{name} is not bound to a node, so no agent removes its Persistent volumes "
            f"({', '.join(persistent)}); they stay where it last ran (Docker volumes "
            f"{nodenames.volume_name(meta.key_of(project), '<volume>', '<node>')})"
        )
    return None


VIEW = KindView(
    "projects",
    Columns(
        ("NAME", "PHASE", "NODE", "READY", "RESTARTS", "AGE"),
        ("NAME", "PHASE", "NODE", "READY", "RESTARTS", "AGE", "HOSTS", "REASON", "MESSAGE"),
        project_row,
    ),
    describe=describe,
    wait_fields={"phase": lambda project: str(project.status.phase)},
    hopeless=hopeless,
    waitable=True,
    deletable=True,
    with_volumes=with_volumes,
    schema=SchemaBits(
        top_required=("spec",),
        required={
            "ProjectSpec": ("services",),
            "Service": ("name", "image"),
            "EnvVar": ("name",),
            "VolumeMount": ("name", "mountPath"),
            "Volume": ("name",),
            "Ingress": ("name", "target"),
            "IngressTarget": ("service", "port"),
            "ServicePort": ("containerPort",),
            "ServiceStatus": ("name",),
        },
        non_empty=frozenset({("ProjectSpec", "services")}),
    ),
)

__all__ = ["VIEW", "describe", "hopeless", "project_row"]
