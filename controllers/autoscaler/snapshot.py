"""The cluster as one pass of the autoscaler judges it (`Cluster`, handed out by `view.ClusterView.snapshot`).

Each node becomes the scheduler's `NodeInfo` (labels, taints, allocatable, cordon, its Lease's renewal, the summed
requests and host ports of the projects bound to it: phases Scheduled, Running, Terminating), so that the
simulation's filters see what the scheduler sees. Pending projects that the scheduler has found unschedulable
(condition Scheduled=False, reason Unschedulable) are the ones a scale-up is for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from caravanserai import meta, v1
from caravanserai.controllers.scheduler.snapshot import (
    NodeInfo,
    ProjectInfo,
    lease_renew_time,
    node_spec_fields,
    project_info,
)
from caravanserai.project.lifecycle import REASON_UNSCHEDULABLE


@dataclass(slots=True)
class Cluster:
    """Nodes by name (as `NodeInfo`), the projects bound to each, the unschedulable Pending projects (`pending`:
    their scheduling views, in the same order), and the group label of each node that carries one."""

    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    node_objects: dict[str, v1.Node] = field(default_factory=dict)
    bound: Mapping[str, Mapping[str, v1.Project]] = field(default_factory=dict)  # node → name → project
    unschedulable: list[v1.Project] = field(default_factory=list)
    pending: list[ProjectInfo] = field(default_factory=list)
    labelled: dict[str, str] = field(default_factory=dict)  # node → the value of its group label
    joined: dict[str, str] = field(default_factory=dict)  # node → group: asked for, registered, being labelled
    _members: dict[str, list[str]] | None = None

    def group_nodes(self, group: str) -> list[str]:
        """Names of the registered nodes of `group` (carrying its label, or joined this pass), sorted."""
        if self._members is None:
            members: dict[str, list[str]] = {}
            for name, owner in {**self.joined, **self.labelled}.items():
                if name in self.nodes:
                    members.setdefault(owner, []).append(name)
            for names in members.values():
                names.sort()
            self._members = members
        return self._members.get(group, [])

    def bound_to(self, node: str) -> list[v1.Project]:
        """The projects bound to `node`, by name."""
        found = self.bound.get(node)
        return [found[name] for name in sorted(found)] if found else []

    def join(self, node: str, group: str) -> None:
        """Count `node` (registered, not labelled yet) as a member of `group` from now on."""
        self.joined[node] = group
        self._members = None


def node_info(node: v1.Node, lease: v1.Lease | None) -> NodeInfo:
    """The scheduler's record of `node` (nothing bound to it yet); Ready by `lease`, if given."""
    labels, unschedulable, taints, allocatable = node_spec_fields(node)
    return NodeInfo(
        node.metadata.name,
        labels=labels,
        unschedulable=unschedulable,
        taints=taints,
        allocatable=allocatable,
        renew_time=lease_renew_time(lease) if lease is not None else None,
        allowed_host_paths=tuple(node.status.allowed_host_paths),
    )


def is_unschedulable(project: v1.Project) -> bool:
    """Pending, not being deleted, and refused by the scheduler (Scheduled=False, reason Unschedulable)."""
    if project.status.phase != v1.PENDING or project.metadata.HasField("deletion_timestamp"):
        return False
    condition = meta.get_condition(project.status.conditions, v1.CONDITION_SCHEDULED)
    return condition is not None and condition.status == v1.FALSE and condition.reason == REASON_UNSCHEDULABLE


def infos(projects: Iterable[v1.Project]) -> list[ProjectInfo]:
    """The scheduling view of each project (requests, selector, tolerations, host paths and ports)."""
    return [project_info(p) for p in projects]


__all__ = ["Cluster", "infos", "is_unschedulable", "node_info"]
