"""Informer handlers of the scheduler: keep `ClusterState` in step and wake the projects a change concerns.

What wakes what (handlers only update in-memory state and add keys; they never await the server):

* a project created, changed in spec, returned to Pending, or whose assumed bind turned out not to land →
  that project;
* a bound project leaving its node or shrinking (deleted, Terminated, Failed, back to Pending), host ports or room
  kept for a nominated project released → the Pending projects that fit on that node now, and those whose
  placement rules read other projects (`SchedulerReconciler.wake_fitting`); every Pending project when the project
  that left had required anti-affinity (what it kept off its domain may fit anywhere there);
* a node added, or changed in labels, taints, unschedulable or allocatable → every Pending project;
* a node's Lease renewed after it had lapsed (the node is Ready again) → every Pending project.

Wake-ups of every Pending project, and of those fitting on freed nodes, are coalesced: many such changes in one
burst of events (a relist of 5 000 nodes) wake them once, on the next turn of the event loop.
"""

from __future__ import annotations

import asyncio

from caravanserai import v1
from caravanserai.clock import Clock
from caravanserai.controllers.scheduler.cache import ClusterState, ProjectChange
from caravanserai.controllers.scheduler.reconciler import SchedulerReconciler
from caravanserai.informer import EventHandler


class SchedulerHandlers:
    """The handlers to register on the project, node and lease informers (before the controller's own)."""

    def __init__(self, reconciler: SchedulerReconciler, state: ClusterState, *, clock: Clock) -> None:
        self._reconciler = reconciler
        self._state = state
        self._clock = clock
        self._wake_scheduled = False
        self._wake_every = False  # the coming wake-up is for every Pending project
        self._freed: set[str] = set()  # nodes where room was released since the last wake-up

    # ---- projects ---------------------------------------------------------------------------------------------

    def projects(self) -> EventHandler[v1.Project]:
        return EventHandler(self._project_added, self._project_updated, self._project_deleted, name="scheduler-state")

    def _project_added(self, project: v1.Project) -> None:
        self._wake_for(self._state.observe_project(None, project))
        self._reconciler.wake(project)

    def _project_updated(self, old: v1.Project, new: v1.Project) -> None:
        change = self._state.observe_project(old, new)
        self._wake_for(change)
        if new.status.phase != v1.PENDING:
            self._reconciler.settle(new)
        elif change.retry or old.status.phase != v1.PENDING or old.metadata.generation != new.metadata.generation:
            self._reconciler.wake(new)

    def _project_deleted(self, project: v1.Project) -> None:
        self._reconciler.settle(project)
        self._wake_for(self._state.forget_project(project))

    def _wake_for(self, change: ProjectChange) -> None:
        if change.anti_moved:
            self.wake_all_soon()
        elif change.freed_on:
            self._freed.update(change.freed_on)
            self._schedule_wake()

    # ---- nodes and leases -------------------------------------------------------------------------------------

    def nodes(self) -> EventHandler[v1.Node]:
        return EventHandler(self._node_changed, lambda old, new: self._node_changed(new), self._node_deleted)

    def _node_changed(self, node: v1.Node) -> None:
        if self._state.upsert_node(node):
            self.wake_all_soon()

    def _node_deleted(self, node: v1.Node) -> None:
        self._state.delete_node(node.metadata.name)

    def leases(self) -> EventHandler[v1.Lease]:
        return EventHandler(self._lease_changed, lambda old, new: self._lease_changed(new), self._lease_deleted)

    def _lease_changed(self, lease: v1.Lease) -> None:
        before = self._state.set_lease(lease)
        node = self._state.node(lease.metadata.name)
        if node is not None and not self._fresh(before) and self._fresh(node.renew_time):
            self.wake_all_soon()

    def _lease_deleted(self, lease: v1.Lease) -> None:
        self._state.delete_lease(lease.metadata.name)

    def _fresh(self, renew_time: float | None) -> bool:
        timeout = self._reconciler.config.heartbeat_timeout
        return renew_time is not None and self._clock.now() < renew_time + timeout

    # ---- coalesced wake-ups ------------------------------------------------------------------------------------

    def wake_all_soon(self) -> None:
        """Wake every Pending project on the next turn of the event loop (once, however often asked)."""
        self._wake_every = True
        self._schedule_wake()

    def _schedule_wake(self) -> None:
        if not self._wake_scheduled:
            self._wake_scheduled = True
            asyncio.get_running_loop().call_soon(self._wake)

    def _wake(self) -> None:
        every, freed = self._wake_every, self._freed
        self._wake_scheduled, self._wake_every, self._freed = False, False, set()
        if every:
            self._reconciler.wake_all_pending()
        elif freed:
            self._reconciler.wake_fitting(freed)


__all__ = ["SchedulerHandlers"]
