"""What the soak watches while it runs: copies of each service across every engine (overlaps, `overlaps`), containers
past their node's fence deadline (`fencecheck`), and whether each project matches its spec (convergence).

A `Snapshot` (`snapshot`) is the projects and Leases as the API lists them plus the Caravanserai containers of
every worker's engine. From a sequence of snapshots:

* **Overlaps** (`overlaps.OverlapTracker`): episodes of a service running on two hosts at once, measured from the
  engines' own times, each a hand-off (planned) or an unplanned duplicate.
* **Fence deadlines** (`fencecheck.FenceCheck`): soak containers seen running on a node after its Lease's renew
  time plus `--fence-after`.
* **Convergence** of a project: not being deleted, phase Running, exactly one running container of each service,
  on its node, made from its current generation and incarnation (labels `generation`, `project-uid`). A deleted
  project has converged when the API no longer lists it and no container of it runs.
* **Recovery after a fault**: from the moment a fault is undone to the first snapshot in which every project the
  workload has left alone for `SETTLE` seconds has converged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.clock import Clock, seconds
from support.fleet import EngineContainer, Fleet
from support.soak.faults import FaultEvent
from support.soak.fencecheck import FenceCheck
from support.soak.overlaps import Overlap, OverlapTracker, Times
from support.soak.snapshot import GENERATION, PROJECT, PROJECT_UID, SERVICE, Snapshot, engine_time

SETTLE = 20.0


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
    """Takes snapshots every `interval` seconds; keeps overlaps, fence lateness and recovery times (see the module
    docstring). `fence_after` is the agents' `--fence-after`; `draining(host, at)` tells whether a host was being
    drained at `at` (monotonic)."""

    fleet: Fleet
    client: Client
    prefix: str
    clock: Clock
    interval: float = 1.0
    fence_after: float = 10.0
    draining: Callable[[str, float], bool] = lambda _host, _at: False
    recoveries: list[tuple[FaultEvent, float]] = field(default_factory=list)
    snapshots: int = 0
    failed_snapshots: int = 0
    times: Times | None = None  # default: `docker inspect` on the fleet's engines
    tracker: OverlapTracker = field(init=False)
    fence: FenceCheck = field(init=False)
    _pending: list[FaultEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tracker = OverlapTracker(self.prefix, self.clock, self.times or self._inspect, self.draining)
        self.fence = FenceCheck(self.fence_after, self.prefix)

    @property
    def overlaps(self) -> list[Overlap]:
        return self.tracker.episodes

    async def _inspect(self, host: str, container_id: str) -> tuple[float, float] | None:
        fmt = "{{.State.StartedAt}} {{.State.FinishedAt}}"
        result = await asyncio.to_thread(self.fleet.dockers[host].cli, "inspect", "--format", fmt, container_id)
        if result.returncode != 0:
            return None
        started, finished = result.stdout.decode().split()
        return engine_time(started), engine_time(finished)

    async def snapshot(self) -> Snapshot:
        """The containers of every engine, then the projects and Leases (None when the API does not answer within
        10 s)."""
        hosts = list(self.fleet.dockers.items())
        wall = self.clock.now()
        rows = await asyncio.gather(*(d.containers(f"label={PROJECT}") for _, d in hosts))
        projects: dict[str, v1.Project] | None
        leases: dict[str, float] | None
        try:
            listed = await asyncio.wait_for(self.client.projects.list(), 10)
            projects = {p.metadata.name: p for p in listed if p.metadata.name.startswith(self.prefix)}
            found = await asyncio.wait_for(self.client.leases.list(), 10)
            leases = {lease.metadata.name: seconds(lease.spec.renew_time) for lease in found}
        except Exception:  # noqa: BLE001 - the API may be unreachable during a fault
            projects = leases = None
            self.failed_snapshots += 1
        containers = [(name, c) for (name, _), found_rows in zip(hosts, rows, strict=True) for c in found_rows]
        return Snapshot(self.clock.monotonic(), projects, containers, leases, wall, self.clock.now())

    def fault_ended(self, event: FaultEvent) -> None:
        self._pending.append(event)

    async def observe(self, snapshot: Snapshot, deleted: Iterable[str], touched: dict[str, float]) -> None:
        """Update overlaps, fence lateness and pending recoveries from one snapshot."""
        self.snapshots += 1
        await self.tracker.observe(snapshot)
        self.fence.observe(snapshot)
        if not self._pending or snapshot.projects is None:
            return
        recent = {name for name, at in touched.items() if at > snapshot.at - SETTLE}
        if not unconverged(snapshot, deleted, skip=recent):
            for event in self._pending:
                self.recoveries.append((event, snapshot.at - event.end))
            self._pending.clear()

    async def close(self) -> None:
        """End the episodes still open (the run is over)."""
        await self.tracker.close()

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


__all__ = ["Observer", "project_problem", "unconverged"]
