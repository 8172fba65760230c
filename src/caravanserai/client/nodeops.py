"""Node operations every client offers (caractrl, the dashboard): cordon, uncordon, and what a drain deletes.

* `set_unschedulable` writes `spec.unschedulable` by read-modify-write (re-read on Conflict): the scheduler places
  nothing new on a cordoned node; what runs keeps running.
* `drainable_projects` names the projects bound to a node that are not already on their way out; draining deletes
  them (the phase table has no client path from Running back to Pending: re-apply a manifest to run it elsewhere).
"""

from __future__ import annotations

from caravanserai import v1
from caravanserai.client.apply import modify
from caravanserai.client.client import Client

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


__all__ = ["LEAVING", "drainable_projects", "set_unschedulable"]
