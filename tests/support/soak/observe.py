"""What the soak watches while it runs: copies of each service across every engine (overlaps), and whether each
project matches its spec (convergence).

A `Snapshot` is the projects as the API lists them plus the Caravanserai containers of every worker's engine
(`docker ps`, by project label). From a sequence of snapshots:

* **Overlaps**: a service with running containers on two or more hosts at once is overlapping from the first
  snapshot that shows it until the first that does not (so a measured overlap is at most one sampling interval
  longer than the real one). `Overlap` records the longest of each episode.
* **Convergence** of a project: not being deleted, phase Running, exactly one running container of each service,
  on its node, made from its current generation and incarnation (labels `generation`, `project-uid`). A deleted
  project has converged when the API no longer lists it and no container of it runs.
* **Recovery after a fault**: from the moment a fault is undone to the first snapshot in which every project the
  workload has left alone for `SETTLE` seconds has converged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
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
    """The longest overlap episode of one service."""

    project: str
    service: str
    hosts: list[str]
    start: float
    seconds: float = 0.0


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
    _open: dict[tuple[str, str], Overlap] = field(default_factory=dict)
    _pending: list[FaultEvent] = field(default_factory=list)

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

    def observe(self, snapshot: Snapshot, deleted: Iterable[str], touched: dict[str, float]) -> None:
        """Update overlaps and pending recoveries from one snapshot."""
        self.snapshots += 1
        self._track_overlaps(snapshot)
        if not self._pending or snapshot.projects is None:
            return
        recent = {name for name, at in touched.items() if at > snapshot.at - SETTLE}
        if not unconverged(snapshot, deleted, skip=recent):
            for event in self._pending:
                self.recoveries.append((event, snapshot.at - event.end))
            self._pending.clear()

    def _track_overlaps(self, snapshot: Snapshot) -> None:
        where: dict[tuple[str, str], set[str]] = {}
        for host, container in snapshot.containers:
            project = container.labels.get(PROJECT, "")
            if container.running and project.startswith(self.prefix):
                where.setdefault((project, container.labels.get(SERVICE, "")), set()).add(host)
        for key, hosts in where.items():
            if len(hosts) > 1:
                episode = self._open.setdefault(key, Overlap(key[0], key[1], sorted(hosts), snapshot.at))
                episode.seconds = snapshot.at - episode.start
                episode.hosts = sorted(set(episode.hosts) | hosts)
        for key in [k for k in self._open if len(where.get(k, ())) < 2]:
            episode = self._open.pop(key)
            episode.seconds = snapshot.at - episode.start
            self.overlaps.append(episode)

    def close(self) -> None:
        """End the episodes still open (the run is over)."""
        self.overlaps.extend(self._open.values())
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
                self.observe(snap, deleted, touched)
            try:
                await asyncio.wait_for(stop.wait(), self.interval)
            except TimeoutError:
                continue


__all__ = ["Observer", "Overlap", "Snapshot", "project_problem", "unconverged"]
