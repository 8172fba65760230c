"""The cluster as the autoscaler judges it, built from the informer caches once per pass (`Cluster`).

Each node becomes the scheduler's `NodeInfo` (labels, taints, allocatable, cordon, its Lease's renewal, the summed
requests and host ports of the projects bound to it: phases Scheduled, Running, Terminating), so that the
simulation's filters see what the scheduler sees. Pending projects that the scheduler has found unschedulable
(condition Scheduled=False, reason Unschedulable) are the ones a scale-up is for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from caravanserai import meta, v1
from caravanserai.controllers.scheduler.ports import host_ports
from caravanserai.controllers.scheduler.resources import Resources, add_into, project_requests
from caravanserai.controllers.scheduler.snapshot import (
    NodeInfo,
    ProjectInfo,
    TaintInfo,
    lease_renew_time,
    node_spec_fields,
    project_info,
)
from caravanserai.project.lifecycle import REASON_UNSCHEDULABLE


@dataclass(slots=True)
class Cluster:
    """Nodes by name (as `NodeInfo`), the projects bound to each, and the unschedulable Pending projects."""

    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    node_objects: dict[str, v1.Node] = field(default_factory=dict)
    bound: dict[str, list[v1.Project]] = field(default_factory=dict)
    unschedulable: list[v1.Project] = field(default_factory=list)
    joined: dict[str, str] = field(default_factory=dict)  # node → group: asked for, registered, being labelled
    _members: dict[str, list[str]] | None = None

    def group_nodes(self, group: str) -> list[str]:
        """Names of the registered nodes of `group` (carrying its label, or joined this pass), sorted."""
        if self._members is None:
            members: dict[str, list[str]] = {}
            for name, obj in sorted(self.node_objects.items()):
                owner = obj.metadata.labels.get(v1.LABEL_NODE_GROUP, self.joined.get(name))
                if owner is not None:
                    members.setdefault(owner, []).append(name)
            self._members = members
        return self._members.get(group, [])

    def join(self, node: str, group: str) -> None:
        """Count `node` (registered, not labelled yet) as a member of `group` from now on."""
        self.joined[node] = group
        self._members = None


class Requests:
    """Each project's summed requests, parsed once per version of the project (a pass reads thousands)."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[str, Resources]] = {}

    def of(self, project: v1.Project) -> Resources:
        name, version = project.metadata.name, project.metadata.resource_version
        known = self._known.get(name)
        if known is None or known[0] != version or not version:
            known = self._known[name] = (version, project_requests(project))
        return known[1]

    def forget_others(self, names: set[str]) -> None:
        for name in [n for n in self._known if n not in names]:
            del self._known[name]


SpecFields = tuple[dict[str, str], bool, tuple[TaintInfo, ...], Resources]
_SPECS: dict[tuple[str, str], SpecFields] = {}  # (node, resource version) → its parsed spec fields
MAX_REMEMBERED = 100_000


def _spec_fields(node: v1.Node) -> SpecFields:
    key = (node.metadata.name, node.metadata.resource_version)
    found = _SPECS.get(key) if key[1] else None
    if found is None:
        if len(_SPECS) >= MAX_REMEMBERED:
            _SPECS.clear()
        found = _SPECS[key] = node_spec_fields(node)
    return found


def node_info(node: v1.Node, lease: v1.Lease | None) -> NodeInfo:
    labels, unschedulable, taints, allocatable = _spec_fields(node)
    labels, allocatable = dict(labels), dict(allocatable)
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


def build(
    nodes: Iterable[v1.Node],
    leases: Iterable[v1.Lease],
    projects: Iterable[v1.Project],
    requests: Requests | None = None,
) -> Cluster:
    """The cluster of these cached objects (see the module docstring); `requests` remembers parsed requests."""
    requests = requests or Requests()
    by_holder = {lease.metadata.name: lease for lease in leases}
    cluster = Cluster()
    for node in nodes:
        name = node.metadata.name
        cluster.nodes[name] = node_info(node, by_holder.get(name))
        cluster.node_objects[name] = node
        cluster.bound[name] = []
    for project in projects:
        where = project.status.node_ref
        if project.status.phase in v1.BOUND_PHASES and where in cluster.nodes:
            info = cluster.nodes[where]
            add_into(info.requested, requests.of(project))
            ports = host_ports(project.spec)
            if ports:
                info.ports.add(project.metadata.name, ports)
            cluster.bound[where].append(project)
        elif is_unschedulable(project):
            cluster.unschedulable.append(project)
    return cluster


def infos(projects: Iterable[v1.Project]) -> list[ProjectInfo]:
    """The scheduling view of each project (requests, selector, tolerations, host paths and ports)."""
    return [project_info(p) for p in projects]


__all__ = ["Cluster", "Requests", "build", "infos", "is_unschedulable", "node_info"]
