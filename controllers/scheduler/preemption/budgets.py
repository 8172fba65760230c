"""Disruption budgets in preemption: the victims preemption may not pick (the rule itself is
`caravanserai.project.disruption`, shared with `caractrl drain` and a node's scale-down).

An available replica of a ProjectSet with a disruption budget is protected on a node when the set's disruptions
allowed now are fewer than its available, evictable replicas on that node (an unavailable one costs nothing): a
victim set (always on one node) can then never take more of the set than its budget allows. A protected replica
still takes its room; it is simply no candidate (as a project already leaving), so preemption prefers other
victims and, when only protected ones would make room, preempts nothing there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from caravanserai import meta, v1
from caravanserai.clock import Clock
from caravanserai.controllers.scheduler.preemption.index import BoundProjects, Candidate
from caravanserai.informer import CacheReader
from caravanserai.project.disruption import available_replicas, disruptions_allowed
from caravanserai.project.replicas import SET_INDEX, set_index


def set_key(project: v1.Project) -> str | None:
    """The key of the set controlling `project` ("namespace/name"), or None."""
    keys = set_index(project)
    return keys[0] if keys else None


@dataclass(frozen=True, slots=True)
class GuardedBound:
    """`bound` as `victims.choose` reads it, with protected replicas no candidates."""

    bound: BoundProjects
    protected: frozenset[str]

    def evictable_on(self, node: str) -> tuple[Candidate, ...]:
        """`BoundProjects.evictable_on` without the protected replicas (still lowest priority first)."""
        evictable = self.bound.evictable_on(node)
        if not self.protected:
            return evictable
        return tuple(c for c in evictable if c.name not in self.protected)

    def node_of(self, name: str) -> str:
        return self.bound.node_of(name)

    def lowest(self, priority: int) -> Iterator[Candidate]:
        """`BoundProjects.lowest` without the protected replicas."""
        return (c for c in self.bound.lowest(priority) if c.name not in self.protected)


class Budgets:
    """Reads the sets and projects from the scheduler's informers; `guard` is called once per attempt."""

    def __init__(self, sets: CacheReader[v1.ProjectSet], projects: CacheReader[v1.Project], *, clock: Clock) -> None:
        self._sets = sets
        self._projects = projects
        self._clock = clock

    def protected(self, bound: BoundProjects) -> frozenset[str]:
        """The keys of replicas preemption may not pick now (module docstring)."""
        budgeted = [s for s in self._sets.list() if s.spec.HasField("disruption_budget")]
        if not budgeted:
            return frozenset()
        # Only the budgeted sets' replicas (the rule reads nothing else), from the cache's index of replicas by set
        projects = [p for s in budgeted for p in self._projects.by_index(SET_INDEX, meta.key_of(s))]
        now = self._clock.now()
        allowed = {meta.key_of(s): disruptions_allowed(s, projects, now=now) for s in budgeted}
        available = {key for s in budgeted for key in available_replicas(s, projects, now=now)}
        owners = {meta.key_of(p): set_key(p) for p in projects if meta.key_of(p) in available}
        per_node: Counter[tuple[str, str]] = Counter()
        for name, owner in owners.items():  # name: a project's key, as the index of bound projects holds them
            node = bound.node_of(name)
            record = bound.get(name)
            if owner is not None and record is not None and record.evictable:
                per_node[(owner, node)] += 1
        return frozenset(
            name
            for name, owner in owners.items()
            if owner is not None and (allowed[owner] or 0) < per_node[(owner, bound.node_of(name))]
        )

    def guard(self, bound: BoundProjects) -> GuardedBound:
        return GuardedBound(bound, self.protected(bound))


__all__ = ["Budgets", "GuardedBound"]
