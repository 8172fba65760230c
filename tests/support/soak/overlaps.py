"""Copies of one service on two hosts at once (overlap episodes), told apart by cause, with their lengths taken from
the engines' own times.

* **Episodes**: a service with running containers on two or more hosts is overlapping from the first snapshot that
  shows it until the first that does not. When the episode ends, the engines' record (`docker inspect`: StartedAt,
  FinishedAt of each container seen in it; every engine runs on this machine, so their times compare) gives its
  length (`measured`: the longest time two containers on different hosts both ran), the old copy's host (whose copy
  started first) and when that copy finished. Where an engine no longer knows a container (removed), the sampled
  length stands (at most one sampling round longer than the real one), the old host is the one that ran the
  service in the snapshot before, and the old copy finished by the snapshot that ended the episode.
* **Hand-off or not**: an episode is a hand-off (a planned move: a drain; the old copy runs on by design until the
  new one is ready) when the project was seen with `status.previousNodeRef` naming the old host within
  `HANDOFF_LOOKBACK` seconds before the episode began or while it lasted, or when the old host was being drained as
  it began (`draining(host, at)`). Every other episode is an unplanned duplicate: node health moved the project off
  a node it no longer heard from, and the fence had to stop the old copy first.
* **Hand-off end** (`handed_over`, wall clock): the first snapshot of the episode that showed the project Running on
  another node than the old one with no `previousNodeRef` (its new copy ready, the hand-off over).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from caravanserai import v1
from caravanserai.clock import Clock
from support.soak.snapshot import PROJECT, SERVICE, Snapshot

HANDOFF_LOOKBACK = 60.0
"""Seconds before an episode in which a hand-off from its old host still explains it (the drain's timeout)."""

Times = Callable[[str, str], Awaitable[tuple[float, float] | None]]
"""(host, container id) → (started, finished) in seconds since the epoch, finished 0.0 while it runs; None when the
engine does not know it."""


@dataclass(slots=True)
class Overlap:
    """One overlap episode of a service: where, when it was first seen (monotonic), its sampled length, the
    containers seen in it (host → ids), its length from the engines' times (None when not known), and what caused
    it (see the module docstring)."""

    project: str
    service: str
    hosts: list[str]
    start: float
    sampled: float = 0.0
    containers: dict[str, set[str]] = field(default_factory=dict)
    measured: float | None = None
    old_host: str = ""
    old_finished: float = 0.0  # wall clock: the engine's FinishedAt, else the snapshot that ended the episode
    handoff: bool = False
    handed_over: float | None = None  # wall clock, for a hand-off
    handoff_hosts: set[str] = field(default_factory=set)  # previousNodeRef values seen
    settled: dict[str, float] = field(default_factory=dict)  # node → first wall time seen Running there, no hand-off
    before: set[str] = field(default_factory=set)  # hosts that ran the service in the snapshot before it began

    @property
    def seconds(self) -> float:
        return self.sampled if self.measured is None else self.measured

    @property
    def handoff_late(self) -> float | None:
        """For a hand-off: how long the old copy ran on after the hand-off ended (None when it is not known)."""
        if not self.handoff or self.handed_over is None or not self.old_finished:
            return None
        return self.old_finished - self.handed_over


def longest_overlap(intervals: dict[str, list[tuple[float, float]]]) -> float:
    """The longest time two intervals of different hosts intersect (0 when none do)."""
    best = 0.0
    hosts = sorted(intervals)
    for i, a in enumerate(hosts):
        for b in hosts[i + 1 :]:
            for start_a, end_a in intervals[a]:
                for start_b, end_b in intervals[b]:
                    best = max(best, min(end_a, end_b) - max(start_a, start_b))
    return best


@dataclass
class OverlapTracker:
    """Follows the episodes of the services of projects named `prefix…` (see the module docstring)."""

    prefix: str
    clock: Clock
    times: Times
    draining: Callable[[str, float], bool] = lambda _host, _at: False
    episodes: list[Overlap] = field(default_factory=list)
    _open: dict[tuple[str, str], Overlap] = field(default_factory=dict)
    _last: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # hosts running each service last time
    _handoffs: dict[str, tuple[str, float]] = field(default_factory=dict)  # project → (previousNodeRef, at)

    async def observe(self, snapshot: Snapshot) -> None:
        """Open, extend and end episodes from one snapshot."""
        self._note_handoffs(snapshot)
        where: dict[tuple[str, str], dict[str, str]] = {}
        for host, container in snapshot.containers:
            project = container.labels.get(PROJECT, "")
            if container.running and project.startswith(self.prefix):
                where.setdefault((project, container.labels.get(SERVICE, "")), {})[host] = container.id
        for key, found in where.items():
            if len(found) > 1:
                self._extend(key, found, snapshot)
        for key in [k for k in self._open if len(where.get(k, ())) < 2]:
            episode = self._open.pop(key)
            episode.sampled = snapshot.at - episode.start
            episode.old_finished = snapshot.wall
            await self._end(episode)
        self._last = {key: set(found) for key, found in where.items()}

    async def close(self) -> None:
        """End the episodes still open (the run is over)."""
        for episode in self._open.values():
            await self._end(episode)
        self._open.clear()

    def _note_handoffs(self, snapshot: Snapshot) -> None:
        for name, project in (snapshot.projects or {}).items():
            if project.status.previous_node_ref:
                self._handoffs[name] = (project.status.previous_node_ref, snapshot.at)

    def _extend(self, key: tuple[str, str], found: dict[str, str], snapshot: Snapshot) -> None:
        episode = self._open.get(key)
        if episode is None:
            episode = self._open[key] = Overlap(key[0], key[1], sorted(found), snapshot.at)
            episode.before = self._last.get(key, set())
            seen = self._handoffs.get(key[0])
            if seen is not None and seen[1] >= snapshot.at - HANDOFF_LOOKBACK:
                episode.handoff_hosts.add(seen[0])
        episode.sampled = snapshot.at - episode.start
        episode.hosts = sorted(set(episode.hosts) | set(found))
        for host, container_id in found.items():
            episode.containers.setdefault(host, set()).add(container_id)
        project = (snapshot.projects or {}).get(key[0])
        if project is None:
            return
        status = project.status
        if status.previous_node_ref:
            episode.handoff_hosts.add(status.previous_node_ref)
        elif status.phase == v1.RUNNING and status.node_ref:
            episode.settled.setdefault(status.node_ref, snapshot.api_wall or snapshot.wall)

    async def _end(self, episode: Overlap) -> None:
        await self._measure(episode)
        if not episode.old_host and len(episode.before) == 1:
            episode.old_host = next(iter(episode.before))
        old = episode.old_host
        episode.handoff = bool(old) and (old in episode.handoff_hosts or self.draining(old, episode.start))
        if episode.handoff:
            ends = [at for node, at in episode.settled.items() if node != old]
            episode.handed_over = min(ends) if ends else None
        self.episodes.append(episode)

    async def _measure(self, episode: Overlap) -> None:
        """Length, old host and the old copy's finish from the engines' times (left as sampled if one is unknown)."""
        now = self.clock.now()
        intervals: dict[str, list[tuple[float, float]]] = {}
        for host, ids in episode.containers.items():
            for container_id in sorted(ids):
                try:
                    known = await self.times(host, container_id)
                except Exception:  # noqa: BLE001 - an engine that does not answer: the sampled length stands
                    known = None
                if known is None:
                    return
                started, finished = known
                intervals.setdefault(host, []).append((started, finished or now))
        episode.measured = max(0.0, longest_overlap(intervals))
        old = min(intervals, key=lambda host: min(start for start, _ in intervals[host]))
        episode.old_host = old
        episode.old_finished = max(end for _, end in intervals[old])


__all__ = ["HANDOFF_LOOKBACK", "Overlap", "OverlapTracker", "Times", "longest_overlap"]
