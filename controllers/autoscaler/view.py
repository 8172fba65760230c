"""The cluster as the autoscaler judges it, kept up to date from the informers' events (`ClusterView`).

The view is changed by the node, Lease and project events as they arrive (`node_changed`, `lease_changed`,
`project_changed` and the `*_deleted` ones; an object whose resource version is already known costs one lookup),
never rebuilt from the caches: a pass over 5,000 nodes and 10,000 projects reads only what changed since the last.
`snapshot` hands a pass its `Cluster`: each node as the scheduler's `NodeInfo` (labels, taints, allocatable,
cordon, its Lease's renewal, the summed requests and host ports of the projects bound to it: phases Scheduled,
Running, Terminating), the projects bound to each, and the Pending projects the scheduler found unschedulable.

A snapshot is consistent and stays as it was handed out: the view never changes a `NodeInfo` record or a node's
bound projects in place, it replaces them (copy on write), so events that arrive while a pass awaits its writes
change the next snapshot, never the one in use (a project must not count both as Pending and as bound).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from caravanserai import meta, v1
from caravanserai.controllers.autoscaler.packing import clone
from caravanserai.controllers.autoscaler.snapshot import Cluster, is_unschedulable, node_info
from caravanserai.controllers.scheduler.ports import HostPorts, host_ports
from caravanserai.controllers.scheduler.resources import Resources, add_into, project_requests
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo, lease_renew_time, project_info
from caravanserai.informer import EventHandler, Informer, Registration


@dataclass(frozen=True, slots=True)
class _Held:
    """What a bound project takes on its node."""

    node: str
    requests: Resources
    ports: HostPorts


class ClusterView:
    """See the module docstring. `wait_synced` returns once every informer it `follow`s has delivered
    its first list (a view fed by hand, `load`, is synced at once)."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        self._node_objects: dict[str, v1.Node] = {}
        self._renewals: dict[str, float | None] = {}  # Lease name (its node's) → last renewal
        self._bound: dict[str, dict[str, v1.Project]] = {}  # node → project key → project (node known or not)
        self._held: dict[str, _Held] = {}  # project key → what it takes where it is bound
        self._unschedulable: dict[str, tuple[v1.Project, ProjectInfo]] = {}
        self._labelled: dict[str, str] = {}  # node → the value of its group label
        self._versions: dict[tuple[str, str], str] = {}  # (kind, key) → resource version seen
        self._registrations: list[Registration[Any]] = []

    # ---- events ---------------------------------------------------------------------------------------------

    def node_changed(self, node: v1.Node) -> None:
        name = node.metadata.name
        if self._seen("nodes", name, node.metadata.resource_version):
            return
        info = node_info(node, None)
        info.renew_time = self._renewals.get(name)
        known = self._nodes.get(name)
        if known is not None:
            info.requested, info.ports = known.requested, known.ports
        else:
            for project in self._bound.get(name, {}).values():
                self._add(info, self._held[meta.key_of(project)], meta.key_of(project))
        self._nodes[name] = info
        self._node_objects[name] = node
        group = node.metadata.labels.get(v1.LABEL_NODE_GROUP)
        if group is None:
            self._labelled.pop(name, None)
        else:
            self._labelled[name] = group

    def node_deleted(self, node: v1.Node) -> None:
        name = node.metadata.name
        self._versions.pop(("nodes", name), None)
        self._nodes.pop(name, None)
        self._node_objects.pop(name, None)
        self._labelled.pop(name, None)

    def lease_changed(self, lease: v1.Lease) -> None:
        name = lease.metadata.name
        renewal = lease_renew_time(lease)
        self._renewals[name] = renewal
        info = self._nodes.get(name)
        if info is not None:
            self._nodes[name] = dataclasses.replace(info, renew_time=renewal)

    def lease_deleted(self, lease: v1.Lease) -> None:
        name = lease.metadata.name
        self._renewals.pop(name, None)
        info = self._nodes.get(name)
        if info is not None:
            self._nodes[name] = dataclasses.replace(info, renew_time=None)

    def project_changed(self, project: v1.Project) -> None:
        name = meta.key_of(project)
        if self._seen("projects", name, project.metadata.resource_version):
            return
        self._forget(name)
        where = project.status.node_ref
        if project.status.phase in v1.BOUND_PHASES and where:
            held = self._held[name] = _Held(where, project_requests(project), host_ports(project.spec))
            self._bound[where] = {**self._bound.get(where, {}), name: project}
            if where in self._nodes:
                self._nodes[where] = info = clone(self._nodes[where])
                self._add(info, held, name)
        elif is_unschedulable(project):
            self._unschedulable[name] = (project, project_info(project))

    def project_deleted(self, project: v1.Project) -> None:
        name = meta.key_of(project)
        self._versions.pop(("projects", name), None)
        self._forget(name)

    # ---- reading --------------------------------------------------------------------------------------------

    def snapshot(self) -> Cluster:
        """The cluster for one pass (module docstring)."""
        waiting = [self._unschedulable[n] for n in sorted(self._unschedulable)]
        return Cluster(
            nodes=dict(self._nodes),
            node_objects=dict(self._node_objects),
            bound=dict(self._bound),
            unschedulable=[project for project, _ in waiting],
            pending=[info for _, info in waiting],
            labelled=dict(self._labelled),
        )

    def load(self, nodes: Iterable[v1.Node], leases: Iterable[v1.Lease], projects: Iterable[v1.Project]) -> None:
        """Feed objects by hand (tests, the benchmark), as the informers' add events would."""
        for lease in leases:
            self.lease_changed(lease)
        for node in nodes:
            self.node_changed(node)
        for project in projects:
            self.project_changed(project)

    def follow(self, nodes: Informer[v1.Node], leases: Informer[v1.Lease], projects: Informer[v1.Project]) -> None:
        """Be changed by these informers' events from now on (register before any other handler of the same
        informers, so that a controller woken by an event finds it in the view already)."""
        self._registrations += [
            nodes.add_event_handler(EventHandler(self.node_changed, _new(self.node_changed), self.node_deleted)),
            leases.add_event_handler(EventHandler(self.lease_changed, _new(self.lease_changed), self.lease_deleted)),
            projects.add_event_handler(
                EventHandler(self.project_changed, _new(self.project_changed), self.project_deleted)
            ),
        ]

    async def wait_synced(self) -> None:
        for registration in self._registrations:
            await registration.wait_synced()

    # ---- bookkeeping ----------------------------------------------------------------------------------------

    def _seen(self, kind: str, name: str, version: str) -> bool:
        """Whether this version was applied already (a resync repeats objects); records it otherwise."""
        key = (kind, name)
        if version and self._versions.get(key) == version:
            return True
        self._versions[key] = version
        return False

    @staticmethod
    def _add(info: NodeInfo, held: _Held, holder: str) -> None:
        add_into(info.requested, held.requests)
        if held.ports:
            info.ports.add(holder, held.ports)

    def _forget(self, name: str) -> None:
        self._unschedulable.pop(name, None)
        held = self._held.pop(name, None)
        if held is None:
            return
        on_node = {k: v for k, v in self._bound.get(held.node, {}).items() if k != name}
        if on_node:
            self._bound[held.node] = on_node
        else:
            self._bound.pop(held.node, None)
        if held.node in self._nodes:
            self._nodes[held.node] = info = clone(self._nodes[held.node])
            add_into(info.requested, held.requests, -1)
            if held.ports:
                info.ports.remove(name, held.ports)


def _new(changed: Any) -> Any:
    """An update handler that applies the new object."""
    return lambda old, new: changed(new)


def build(nodes: Iterable[v1.Node], leases: Iterable[v1.Lease], projects: Iterable[v1.Project]) -> Cluster:
    """The cluster of these objects at once (a view loaded by hand, then its snapshot)."""
    view = ClusterView()
    view.load(nodes, leases, projects)
    return view.snapshot()


__all__ = ["ClusterView", "build"]
