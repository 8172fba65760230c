"""The projects bound to each node, as preemption sees them: who could be evicted there, and who is leaving.

Filed from the scheduler's project informer (`observe`, `forget`), so a preemption decision reads one node's
projects in O(projects on that node) and never walks the cluster's projects.

Guarantees:

* **As the scheduler counts them.** A project is filed on its node exactly while `ClusterState` counts its
  requests there (phases Scheduled, Running, Terminating with a `nodeRef`), with the same summed requests, so
  removing a set of filed projects from a node's `requested` is exact.
* **Evictable** (`Candidate.evictable`): Scheduled or Running, not being deleted, not already moving
  (`status.move`). The others still take room but are on their way out (`leaving`).
* **Evictions count at once.** `mark_leaving` files a victim as leaving when its eviction is decided, before the
  write shows, so no second decision picks it again; the informer's next view of it replaces the mark.
* Requests and host ports are read once per generation.
* **Cheap to scan.** Per node, the evictable projects sorted by priority are kept (`evictable_on`, rebuilt only
  when that node's projects change), so a preemption decision over thousands of nodes skips a node with nothing
  below the preemptor's priority in one comparison and never copies or sorts per decision.
* **Cheapest victims first.** Over every node, the evictable projects are kept in the order a single victim is
  chosen in (lowest priority, then newest, then name: `lowest`), updated as they are filed, so the best single
  victim of the cluster is found by walking from the front instead of by looking at every node.
* A status change that leaves a project's record as it was (same node, generation, and evictability) changes
  nothing here.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from caravanserai import meta, v1
from caravanserai.clock import seconds
from caravanserai.controllers.scheduler.ports import HostPorts, host_ports
from caravanserai.controllers.scheduler.resources import Resources, project_requests
from caravanserai.controllers.scheduler.snapshot import shown
from caravanserai.informer import EventHandler

EVICTABLE_PHASES = (v1.SCHEDULED, v1.RUNNING)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A project bound to a node (`name`: its key, "namespace/name"): its priority, creation time (seconds since the
    epoch), summed requests, host ports, and whether it may be evicted (False: it is already leaving)."""

    name: str
    priority: int
    created: float
    requests: Resources = field(default_factory=dict)
    ports: HostPorts = ()
    evictable: bool = True
    generation: int = 0

    def __str__(self) -> str:
        return f"{shown(self.name)} (priority {self.priority})"


def candidate(project: v1.Project) -> Candidate:
    """The record of a bound project."""
    return Candidate(
        meta.key_of(project),
        project.spec.priority,
        seconds(project.metadata.creation_timestamp),
        project_requests(project),
        host_ports(project.spec),
        evictable(project),
        project.metadata.generation,
    )


def evictable(project: v1.Project) -> bool:
    """Scheduled or Running, not being deleted, not already moving."""
    status = project.status
    return (
        status.phase in EVICTABLE_PHASES
        and not project.metadata.HasField("deletion_timestamp")
        and not status.HasField("move")
    )


@dataclass(slots=True)
class BoundProjects:
    """Per node name, the projects bound there. See the module docstring."""

    _by_node: dict[str, dict[str, Candidate]] = field(default_factory=dict)
    _node_of: dict[str, str] = field(default_factory=dict)
    _evictable: dict[str, tuple[Candidate, ...]] = field(default_factory=dict)  # node → sorted by priority
    _order: list[tuple[int, float, str]] = field(default_factory=list)  # `_order_key` of every evictable one, sorted

    def evictable_on(self, node: str) -> tuple[Candidate, ...]:
        """The evictable projects on `node`, lowest priority first (then oldest, then by name)."""
        cached = self._evictable.get(node)
        if cached is None:
            on_node = self._by_node.get(node, {}).values()
            cached = tuple(sorted((c for c in on_node if c.evictable), key=lambda c: (c.priority, c.created, c.name)))
            self._evictable[node] = cached
        return cached

    def on(self, node: str) -> list[Candidate]:
        """The projects bound to `node` (a new list)."""
        return list(self._by_node.get(node, {}).values())

    def get(self, name: str) -> Candidate | None:
        node = self._node_of.get(name)
        return None if node is None else self._by_node[node].get(name)

    def node_of(self, name: str) -> str:
        return self._node_of.get(name, "")

    def lowest(self, priority: int) -> Iterator[Candidate]:
        """The evictable projects of priority below `priority` over every node, in the order single victims are
        preferred: lowest priority, then newest, then by name. Read it without filing anything meanwhile."""
        for key in self._order:
            if key[0] >= priority:
                return
            record = self.get(key[2])
            if record is not None:
                yield record

    def observe(self, project: v1.Project) -> None:
        """File `project` as its status now says (bound to a node, or not)."""
        name, status = meta.key_of(project), project.status
        if status.phase not in v1.BOUND_PHASES or not status.node_ref:
            self.forget(name)
            return
        node = status.node_ref
        old = self.get(name)
        if old is not None and self._node_of[name] == node and old.generation == project.metadata.generation:
            fresh = candidate_status(old, project)
            if fresh is old:
                return  # filed as it is
        else:
            fresh = candidate(project)
        self.forget(name)
        self._file(node, fresh)

    def forget(self, name: str) -> None:
        node = self._node_of.pop(name, None)
        if node is not None:
            self._evictable.pop(node, None)
            on_node = self._by_node[node]
            record = on_node.pop(name, None)
            if not on_node:
                del self._by_node[node]
            if record is not None and record.evictable:
                self._unorder(record)

    def mark_leaving(self, name: str) -> None:
        """`name` is being evicted: no longer a candidate (until the informer shows it again)."""
        node = self._node_of.get(name)
        if node is not None:
            self._replace(node, replace(self._by_node[node][name], evictable=False))

    def unmark(self, record: Candidate) -> None:
        """Undo `mark_leaving` (the eviction was not written): `record` is filed again if its project still is."""
        node = self._node_of.get(record.name)
        if node is not None and self._by_node[node].get(record.name) is not None:
            self._replace(node, record)

    def _file(self, node: str, record: Candidate) -> None:
        self._by_node.setdefault(node, {})[record.name] = record
        self._node_of[record.name] = node
        self._evictable.pop(node, None)
        if record.evictable:
            insort(self._order, _order_key(record))

    def _replace(self, node: str, record: Candidate) -> None:
        old = self._by_node[node][record.name]
        if old.evictable:
            self._unorder(old)
        self._file(node, record)

    def _unorder(self, record: Candidate) -> None:
        key = _order_key(record)
        at = bisect_left(self._order, key)
        if at < len(self._order) and self._order[at] == key:
            del self._order[at]

    def handler(self) -> EventHandler[v1.Project]:
        """The informer handler that keeps this index (register it before the scheduler's own)."""
        return EventHandler(
            self.observe,
            lambda old, new: self.observe(new),
            lambda project: self.forget(meta.key_of(project)),
            name="scheduler-preemption-index",
        )

    def leaving_below(self, node: str, priority: int) -> list[str]:
        """Projects of priority below `priority` on their way off `node` (evicted, moving, terminating), sorted."""
        return sorted(c.name for c in self._by_node.get(node, {}).values() if not c.evictable and c.priority < priority)


def _order_key(record: Candidate) -> tuple[int, float, str]:
    return record.priority, -record.created, record.name


def candidate_status(old: Candidate, project: v1.Project) -> Candidate:
    """`old` (same node, same generation) with what the new status says about leaving; the spec is not re-read."""
    now = evictable(project)
    return old if old.evictable == now else replace(old, evictable=now)


__all__ = ["BoundProjects", "Candidate", "EVICTABLE_PHASES", "candidate", "candidate_status", "evictable"]
