"""Which node of a group may be given back, as pure functions.

A node is a candidate when its group may shrink (more registered nodes than `min`, scale-down not disabled, no
removal already under way) and its **utilisation** — the largest share requested of any resource it offers (cpu,
memory, extended resources) — stayed under the group's threshold for the idle time. A candidate is removed only
when it is **safe**:

* Ready and not cordoned by anyone (a cordoned node is an admin's business);
* no bound project carries `caravanserai.io/safe-to-evict: "false"`, and none is being deleted or moved;
* every bound project fits on some other Ready, uncordoned node, by the scheduler's filters, counting the
  projects placed there by this very check (`fit_elsewhere`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from caravanserai import v1
from caravanserai.controllers.autoscaler.packing import clone, fits, place
from caravanserai.controllers.scheduler.filters import FilterContext, checks_for
from caravanserai.controllers.scheduler.resources import CPU, MEMORY
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo, shown


def utilization(node: NodeInfo) -> float:
    """The largest share requested of any resource the node offers (cpu, memory, extended resources: a node whose
    gpus are all taken is busy however little cpu its projects ask for)."""
    shares = [node.requested.get(n, 0) / have for n, have in node.allocatable.items() if have > 0]
    return max(shares, default=0.0)


def not_evictable(projects: Sequence[v1.Project]) -> str | None:
    """Why one of `projects` keeps its node, or None."""
    for project in projects:
        name = project.metadata.name
        if project.metadata.annotations.get(v1.ANNOTATION_SAFE_TO_EVICT, "").lower() == "false":
            return f"project {name} is annotated {v1.ANNOTATION_SAFE_TO_EVICT}=false"
        if project.metadata.HasField("deletion_timestamp") or project.status.HasField("move"):
            return f"project {name} is already on its way out"
    return None


def fit_elsewhere(
    projects: Sequence[ProjectInfo], node: str, nodes: Mapping[str, NodeInfo], ctx: FilterContext
) -> str | None:
    """None when every project of `projects` (bound to `node`) fits on another node, placed one after the other
    (largest first); else which one does not. Like the scheduler's search, each project's search stops at the
    first node the filters accept, so a busy cluster is not walked node by node for every project; the nodes of
    `nodes` are never changed (a node given a project here is a copy)."""
    copies: dict[str, NodeInfo] = {}
    for project in sorted(projects, key=lambda p: (-p.requests.get(CPU, 0), -p.requests.get(MEMORY, 0), p.name)):
        checks = checks_for(project, ctx=ctx)
        target = None
        for name, original in nodes.items():
            candidate = copies.get(name, original)
            if name != node and not candidate.unschedulable and fits(project, candidate, ctx, checks):
                target = candidate
                break
        if target is None:
            return f"project {shown(project.name)} fits on no other node"
        if target.name not in copies:
            target = copies[target.name] = clone(target)
        place(project, target)
    return None


def idle_for(since: float | None, now: float) -> float:
    """How long a node has been under the threshold (0 when it is not)."""
    return 0.0 if since is None else max(0.0, now - since)


__all__ = ["fit_elsewhere", "idle_for", "not_evictable", "utilization"]
