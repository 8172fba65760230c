"""Node and project operations every client offers (caractrl, the dashboard): cordon, uncordon, drain, restart.

* `set_unschedulable` writes `spec.unschedulable` by read-modify-write (re-read on Conflict): the scheduler places
  nothing new on a cordoned node; what runs keeps running.
* `drainable_projects` names the projects bound to a node that are not already on their way out (for
  `drain --delete`).
* `movable_projects` names those a drain moves (Scheduled, Running, not being deleted), and `move_project` moves
  one off its node with `lifecycle.move` (reason NodeDrained unless told otherwise): a project without backed-up
  volumes returns to Pending at once with a hand-off (the node's agent keeps the old containers until the project
  runs on its new node or `handoff_until` passes); one with backed-up volumes stays bound with `status.move` until
  its node has taken the final backups (or `handoff_until` passes). A move already under way is left as it is.
* `preempt_project` evicts one the same way, without a hand-off and with a `Preempted` condition naming the
  higher-priority project the room is for (`lifecycle.preempt`; written by the scheduler).
* `unprotected_volumes` names, per project, the Persistent volumes without a backup whose data a move leaves
  behind; `left_behind` words them in one line. Drain (caractrl and the dashboard) refuses such moves unless
  forced, before writing anything.
* `restart_services` stamps `restartedAt` on the named services (all when none are named): a spec change, so
  the agent recreates exactly those containers, and a Failed or Succeeded project returns to Pending.
* `requested` sums the resource requests of the projects bound to a node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal

from caravanserai import meta, v1
from caravanserai.client.apply import CONFLICT_RETRIES, modify
from caravanserai.client.client import Client
from caravanserai.clock import timestamp
from caravanserai.errors import Conflict
from caravanserai.project import backups, lifecycle
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
    """Keys ("namespace/name") of the projects in `projects` that a drain of `node` moves, sorted."""
    return sorted(
        meta.key_of(p)
        for p in projects
        if p.status.node_ref == node
        and p.status.phase in (v1.SCHEDULED, v1.RUNNING)
        and not p.metadata.HasField("deletion_timestamp")
    )


def unprotected_volumes(projects: Iterable[v1.Project]) -> dict[str, list[str]]:
    """Per project of `projects` that has any (by name, sorted), its Persistent volumes without a backup: a move
    leaves their data behind on the node it leaves."""
    found = {p.metadata.name: backups.unprotected(p.spec) for p in projects}
    return {name: volumes for name, volumes in sorted(found.items()) if volumes}


def left_behind(unprotected: Mapping[str, Sequence[str]]) -> str:
    """`project/web (volume data), project/db (volumes pg, wal)`: the projects and volumes a move would leave
    behind, in one line."""
    parts = []
    for name, volumes in unprotected.items():
        noun = "volume" if len(volumes) == 1 else "volumes"
        parts.append(f"project/{name} ({noun} {', '.join(volumes)})")
    return ", ".join(parts)


def drain_refusal(node: str, unprotected: Mapping[str, Sequence[str]], way_out: str) -> str:
    """Why a drain of `node` does not move the projects in `unprotected`, in one line naming them, then `way_out`
    (what the caller's user can do about it)."""
    return (
        f"cannot drain node/{node}: {left_behind(unprotected)} would leave Persistent volume data behind on {node} "
        f"(no backup configured); {way_out}"
    )


def drain_message(node: str) -> str:
    """The Phase message of a project a drain of `node` moves."""
    return f"Node {node} is being drained; placing the project elsewhere"


async def move_project(
    client: Client,
    name: str,
    node: str,
    *,
    now: float,
    handoff_until: float,
    reason: str = lifecycle.REASON_NODE_DRAINED,
    message: str = "",
) -> bool:
    """Move project `name` off `node` (`lifecycle.move`, with `reason` and `message`, default a drain's): back to
    Pending with a hand-off until `handoff_until`, or, with backed-up volumes, bound with `status.move` until
    its node hands the final snapshots over. True when it is moving (a move already under way is not written
    again); False when it is not (any more) a Scheduled or Running project on `node`. Re-read and retried on
    Conflict."""

    def moved(current: v1.Project) -> v1.Project:
        text = message or drain_message(node)
        return lifecycle.move(current, reason=reason, message=text, now=now, handoff_until=handoff_until)

    return await _move_off(client, name, node, moved)


async def preempt_project(
    client: Client, name: str, node: str, *, preemptor: str, message: str, now: float, deadline: float
) -> v1.Project | None:
    """Evict project `name` from `node` for `preemptor` (`lifecycle.preempt`: the move of a drain, without a
    hand-off, with a `Preempted` condition naming the preemptor). The project as stored when it was evicted by
    this call; None when it is not (any more) a Scheduled or Running project on `node`, or already moving.
    Re-read and retried on Conflict."""
    evicted: list[v1.Project] = []

    def preempted(current: v1.Project) -> v1.Project:
        return lifecycle.preempt(current, preemptor=preemptor, message=message, now=now, deadline=deadline)

    moving = await _move_off(client, name, node, preempted, written=evicted.append)
    return evicted[0] if moving and evicted else None


async def _move_off(
    client: Client,
    name: str,
    node: str,
    build: Callable[[v1.Project], v1.Project],
    *,
    written: Callable[[v1.Project], None] | None = None,
) -> bool:
    """The one read-check-write of every move off a node: read `name` live; unless it is a Scheduled or Running
    project on `node`, do nothing (False); a move already under way is left as it is (True); else write
    `build(current)` by compare-and-swap (True), re-reading on Conflict; `written` receives the stored project."""
    for attempt in range(1, CONFLICT_RETRIES + 1):
        current = await client.projects.get(name)
        if not movable_projects([current], node):
            return False
        if current.status.HasField("move"):
            return True
        try:
            stored = await client.projects.update_status(build(current))
        except Conflict:
            if attempt == CONFLICT_RETRIES:
                raise
            continue
        if written is not None:
            written(stored)
        return True
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
    "drain_message",
    "drain_refusal",
    "drainable_projects",
    "left_behind",
    "move_project",
    "movable_projects",
    "preempt_project",
    "requested",
    "restart_services",
    "set_unschedulable",
    "unprotected_volumes",
]
