"""What the soak watches while it runs: copies of each service across every engine (overlaps), and whether each
project matches its spec (convergence).

A `Snapshot` is the projects as the API lists them plus the Caravanserai containers of every worker's engine
(`docker ps`, by project label). From a sequence of snapshots:

* **Overlaps**: a service with running containers on two or more hosts at once is overlapping from the first
  snapshot that shows it until the first that does not. When the episode ends, its length is taken from the
  engines' own record (`docker inspect`: StartedAt, FinishedAt of each container seen in it; every engine runs on
  this machine, so their times compare): the longest time two containers on different hosts both ran. Where an
  engine no longer knows a container (removed), the sampled length stands (at most one sampling round longer
  than the real one). `Overlap` keeps both.
* **Convergence** of a project: not being deleted, phase Running, exactly one running container of each service,
  on its node, made from its current generation and incarnation (labels `generation`, `project-uid`). A deleted
  project has converged when the API no longer lists it and no container of it runs.
* **Recovery after a fault**: from the moment a fault is undone to the first snapshot in which every project the
  workload has left alone for `SETTLE` seconds has converged.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from support.fleet import EngineContainer, Fleet
from support.soak.faults import FaultEvent

PROJECT = "caravanserai.io/project"
SERVICE = "caravanserai.io/service"
GENERATION = "caravanserai.io/generation"
PROJECT_UID = "caravanserai.io/project-uid"
SETTLE = 20.0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Projects by name (None when the API did not answer), and (host, container) pairs of every engine, at `at`
    (monotonic)."""

    at: float
    projects: dict[str, v1.Project] | None
    containers: list[tuple[str, EngineContainer]]

    def running(self, project: str) -> list[tuple[str, EngineContainer]]:
        return [(h, c) for h, c in self.containers if c.running and c.labels.get(PROJECT) == project]


@dataclass(slots=True)
class Overlap:
    """One overlap episode of a service: where, when it was first seen (monotonic), its sampled length, the
    containers seen in it (host → ids) and its length from the engines' times (None when not known)."""

    project: str
    service: str
    hosts: list[str]
    start: float
    sampled: float = 0.0
    containers: dict[str, set[str]] = field(default_factory=dict)
    measured: float | None = None

    @property
    def seconds(self) -> float:
        return self.sampled if self.measured is None else self.measured


Times = Callable[[str, str], Awaitable[tuple[float, float] | None]]
"""(host, container id) → (started, finished) in seconds since the epoch, finished 0.0 while it runs; None when the
engine does not know it."""


def engine_time(text: str) -> float:
    """Docker's RFC 3339 time with nanoseconds → seconds since the epoch (0.0 for Docker's zero time)."""
    if text.startswith("0001-"):
        return 0.0
    head, _, rest = text.rstrip("Z").partition(".")
    fraction = float(f"0.{rest}") if rest else 0.0
    return datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.UTC).timestamp() + fraction


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


def project_problem(project: v1.Project, copies: list[tuple[str, EngineContainer]]) -> str | None:
    """Why `project` (not being deleted) does not match its spec, given its running containers; None if it does."""
    if project.status.phase != v1.RUNNING or not project.status.node_ref:
        return f"phase {project.status.phase or 'unset'}"
    node = project.status.node_ref
    for service in project.spec.services:
        mine = [(h, c) for h, c in copies if c.labels.get(SERVICE) == service.name]
        where = sorted(h for h, _ in mine)
        if where != [node]:
            return f"service {service.name}: running on {where or 'no host'}, bound to {node}"
        labels = mine[0][1].labels
        if labels.get(GENERATION) != str(project.metadata.generation):
            return f"service {service.name}: generation {labels.get(GENERATION)} != {project.metadata.generation}"
        if labels.get(PROJECT_UID, project.metadata.uid) != project.metadata.uid:
            return f"service {service.name}: a container of another incarnation"
    return None


def unconverged(snapshot: Snapshot, deleted: Iterable[str], *, skip: set[str] | None = None) -> dict[str, str]:
    """name → why, for every project of the snapshot and every name in `deleted` that has not converged."""
    skip = skip or set()
    if snapshot.projects is None:
        return {"*": "the API did not answer"}
    out: dict[str, str] = {}
    for name, project in snapshot.projects.items():
        if name in skip:
            continue
        if project.metadata.HasField("deletion_timestamp"):
            out[name] = "still being deleted"
            continue
        problem = project_problem(project, snapshot.running(name))
        if problem:
            out[name] = problem
    for name in deleted:
        if name in skip or name in snapshot.projects:
            continue
        left = sorted(h for h, _ in snapshot.running(name))
        if left:
            out[name] = f"deleted, still running on {left}"
    return out


@dataclass
class Observer:
    """Takes snapshots every `interval` seconds; keeps overlaps and recovery times (see the module docstring)."""

    fleet: Fleet
    client: Client
    prefix: str
    clock: Clock
    interval: float = 1.0
    overlaps: list[Overlap] = field(default_factory=list)
    recoveries: list[tuple[FaultEvent, float]] = field(default_factory=list)
    snapshots: int = 0
    failed_snapshots: int = 0
    times: Times | None = None  # default: `docker inspect` on the fleet's engines
    _open: dict[tuple[str, str], Overlap] = field(default_factory=dict)
    _pending: list[FaultEvent] = field(default_factory=list)

    async def _inspect(self, host: str, container_id: str) -> tuple[float, float] | None:
        fmt = "{{.State.StartedAt}} {{.State.FinishedAt}}"
        result = await asyncio.to_thread(self.fleet.dockers[host].cli, "inspect", "--format", fmt, container_id)
        if result.returncode != 0:
            return None
        started, finished = result.stdout.decode().split()
        return engine_time(started), engine_time(finished)

    async def _measure(self, episode: Overlap) -> None:
        """Set `episode.measured` from the engines' times of its containers (left None if one is unknown)."""
        times = self.times or self._inspect
        now = self.clock.now()
        intervals: dict[str, list[tuple[float, float]]] = {}
        for host, ids in episode.containers.items():
            for container_id in sorted(ids):
                try:
                    known = await times(host, container_id)
                except Exception:  # noqa: BLE001 - an engine that does not answer: the sampled length stands
                    known = None
                if known is None:
                    return
                started, finished = known
                intervals.setdefault(host, []).append((started, finished or now))
        episode.measured = max(0.0, longest_overlap(intervals))

    async def snapshot(self) -> Snapshot:
        """The containers of every engine, then the projects (None when the API does not answer within 10 s)."""
        hosts = list(self.fleet.dockers.items())
        rows = await asyncio.gather(*(d.containers(f"label={PROJECT}") for _, d in hosts))
        projects: dict[str, v1.Project] | None
        try:
            listed = await asyncio.wait_for(self.client.projects.list(), 10)
            projects = {p.metadata.name: p for p in listed if p.metadata.name.startswith(self.prefix)}
        except Exception:  # noqa: BLE001 - the API may be unreachable during a fault
            projects = None
            self.failed_snapshots += 1
        containers = [(name, c) for (name, _), found in zip(hosts, rows, strict=True) for c in found]
        return Snapshot(self.clock.monotonic(), projects, containers)

    def fault_ended(self, event: FaultEvent) -> None:
        self._pending.append(event)

    async def observe(self, snapshot: Snapshot, deleted: Iterable[str], touched: dict[str, float]) -> None:
        """Update overlaps and pending recoveries from one snapshot."""
        self.snapshots += 1
        for episode in self._track_overlaps(snapshot):
            await self._measure(episode)
            self.overlaps.append(episode)
        if not self._pending or snapshot.projects is None:
            return
        recent = {name for name, at in touched.items() if at > snapshot.at - SETTLE}
        if not unconverged(snapshot, deleted, skip=recent):
            for event in self._pending:
                self.recoveries.append((event, snapshot.at - event.end))
            self._pending.clear()

    def _track_overlaps(self, snapshot: Snapshot) -> list[Overlap]:
        """Open and extend episodes from one snapshot; the episodes it ends."""
        where: dict[tuple[str, str], dict[str, str]] = {}
        for host, container in snapshot.containers:
            project = container.labels.get(PROJECT, "")
            if container.running and project.startswith(self.prefix):
                where.setdefault((project, container.labels.get(SERVICE, "")), {})[host] = container.id
        for key, found in where.items():
            if len(found) > 1:
                episode = self._open.setdefault(key, Overlap(key[0], key[1], sorted(found), snapshot.at))
                episode.sampled = snapshot.at - episode.start
                episode.hosts = sorted(set(episode.hosts) | set(found))
                for host, container_id in found.items():
                    episode.containers.setdefault(host, set()).add(container_id)
        ended = []
        for key in [k for k in self._open if len(where.get(k, ())) < 2]:
            episode = self._open.pop(key)
            episode.sampled = snapshot.at - episode.start
            ended.append(episode)
        return ended

    async def close(self) -> None:
        """End the episodes still open (the run is over)."""
        for episode in self._open.values():
            await self._measure(episode)
            self.overlaps.append(episode)
        self._open.clear()

    async def run(self, stop: asyncio.Event, deleted: list[str], touched: dict[str, float]) -> None:
        """Snapshot and observe until `stop` is set (a snapshot that fails, with the control plane down, is
        counted and skipped)."""
        while not stop.is_set():
            try:
                snap = await asyncio.wait_for(self.snapshot(), 30)
            except Exception:  # noqa: BLE001 - the API may be unreachable during a fault
                self.failed_snapshots += 1
            else:
                await self.observe(snap, deleted, touched)
            try:
                await asyncio.wait_for(stop.wait(), self.interval)
            except TimeoutError:
                continue


__all__ = [
    "Observer",
    "Overlap",
    "Snapshot",
    "Times",
    "engine_time",
    "longest_overlap",
    "project_problem",
    "unconverged",
]
