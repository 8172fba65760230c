"""Node and project operations every client offers (caractrl, the dashboard): cordon, uncordon, drain, restart.

* `set_unschedulable` writes `spec.unschedulable` by read-modify-write (re-read on Conflict): the scheduler places
  nothing new on a cordoned node; what runs keeps running.
* `drainable_projects` names the projects bound to a node that are not already on their way out (for
  `drain --delete`).
* `movable_projects` names those a drain moves (Scheduled, Running, not being deleted), and `move_project` sends
  one back to Pending (reason NodeDrained) with a hand-off: the drained node's agent keeps the old containers
  until the project runs on its new node or `handoff_until` passes.
* `restart_services` stamps `restartedAt` on the named services (all when none are named): a spec change, so
  the agent recreates exactly those containers, and a Failed or Succeeded project returns to Pending.
* `requested` sums the resource requests of the projects bound to a node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal

from caravanserai import v1
from caravanserai.client.apply import CONFLICT_RETRIES, modify
from caravanserai.client.client import Client
from caravanserai.clock import timestamp
from caravanserai.errors import Conflict
from caravanserai.project import lifecycle
from caravanserai.text.quantity import parse_quantity

LEAVING = (v1.TERMINATING, v1.TERMINATED)
"""Projects in these phases are already on their way out: a drain leaves them alone."""


async def set_unschedulable(client: Client, node: str, value: bool) -> bool:
    """Set spec.unschedulable of `node`; returns whether it changed. NotFound when there is no such node."""

    def mutate(obj: v1.Node) -> bool:
        if obj.spec.unschedulable == value:
            return False
        obj.spec.unschedulable = value
        return True

    _, changed = await modify(client.nodes, node, mutate)
    return changed


async def drainable_projects(client: Client, node: str) -> list[str]:
    """Names of the projects bound to `node` that a drain deletes, sorted."""
    page = await client.projects.list(field_selector=f"status.nodeRef={node}")
    return sorted(p.metadata.name for p in page if p.status.phase not in LEAVING)


def movable_projects(projects: Sequence[v1.Project], node: str) -> list[str]:
    """Names of the projects in `projects` that a drain of `node` moves, sorted."""
    return sorted(
        p.metadata.name
        for p in projects
        if p.status.node_ref == node
        and p.status.phase in (v1.SCHEDULED, v1.RUNNING)
        and not p.metadata.HasField("deletion_timestamp")
    )


async def move_project(client: Client, name: str, node: str, *, now: float, handoff_until: float) -> bool:
    """Send project `name` off `node` back to Pending (reason NodeDrained, with a hand-off). False when it is not
    (any more) a Scheduled or Running project on `node`. Re-read and retried on Conflict."""
    for attempt in range(1, CONFLICT_RETRIES + 1):
        current = await client.projects.get(name)
        if not movable_projects([current], node):
            return False
        moved = lifecycle.return_to_pending(
            current,
            reason=lifecycle.REASON_NODE_DRAINED,
            message=f"Node {node} is being drained; placing the project elsewhere",
            now=now,
            handoff_until=handoff_until,
        )
        try:
            await client.projects.update_status(moved)
            return True
        except Conflict:
            if attempt == CONFLICT_RETRIES:
                raise
    return False


async def restart_services(client: Client, project: str, services: Sequence[str], *, now: float) -> v1.Project:
    """Stamp `restartedAt = now` on the named services of `project` (every service when `services` is empty).
    ValueError naming the services that are not in the project (nothing is written then)."""

    def mutate(obj: v1.Project) -> bool:
        declared = [s.name for s in obj.spec.services]
        unknown = [name for name in services if name not in declared]
        if unknown:
            raise ValueError(f"project {project} has no service {', '.join(unknown)} (it has {', '.join(declared)})")
        for service in obj.spec.services:
            if not services or service.name in services:
                service.restarted_at.CopyFrom(timestamp(now))
        return True

    updated, _ = await modify(client.projects, project, mutate)
    stored: v1.Project = updated
    return stored


def requested(projects: Iterable[v1.Project]) -> dict[str, Decimal]:
    """The sum of the resource requests of `projects` per resource name (what the scheduler counts as taken on
    their node); unparsable quantities are skipped (the apiserver refuses them anyway)."""
    totals: dict[str, Decimal] = {}
    for project in projects:
        for service in project.spec.services:
            for name, text in service.resources.requests.items():
                try:
                    totals[name] = totals.get(name, Decimal(0)) + parse_quantity(text)
                except ValueError:
                    continue
    return totals


__all__ = [
    "LEAVING",
    "drainable_projects",
    "move_project",
    "movable_projects",
    "requested",
    "restart_services",
    "set_unschedulable",
]
