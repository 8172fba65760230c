"""The fence deadline, checked from outside: no container of the soak runs on a node past that node's deadline, its
Lease's last renew time plus the agents' `--fence-after` (the moment node health may move its projects).

* A node's renew time is the latest seen in any snapshot (renewals only move it on, so a read from a lagging
  apiserver never pulls it back).
* Every snapshot that listed the Leases checks every soak container its engine listed as running: running at
  `Snapshot.wall` (just before the engines were listed) later than its node's deadline is *late* by that much. A
  container's lateness is the greatest seen; it is a lower bound, short of the truth by at most one sampling
  interval (the container may have stopped any time before the next look).
* Nodes whose Lease was never seen are not judged. `silences` counts the deadlines seen passing (node, deadline):
  the occasions the check had something to catch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from support.soak.snapshot import PROJECT, Snapshot


@dataclass(slots=True)
class Late:
    """A container seen running past its node's fence deadline (wall clock), by `late` seconds at most seen."""

    host: str
    container: str
    project: str
    deadline: float
    late: float


@dataclass
class FenceCheck:
    """See the module docstring."""

    fence_after: float
    prefix: str
    renewed: dict[str, float] = field(default_factory=dict)  # node → latest renew time seen (wall clock)
    late: dict[tuple[str, str], Late] = field(default_factory=dict)  # (host, container id) → its worst lateness
    checked: int = 0  # snapshots that could be checked (the API answered with the Leases)
    silences: set[tuple[str, float]] = field(default_factory=set)  # (node, deadline) seen passed

    def observe(self, snapshot: Snapshot) -> None:
        if snapshot.leases is None:
            return
        self.checked += 1
        for node, renewed in snapshot.leases.items():
            self.renewed[node] = max(self.renewed.get(node, 0.0), renewed)
        for node, renewed in self.renewed.items():
            if snapshot.wall > renewed + self.fence_after:
                self.silences.add((node, renewed + self.fence_after))
        for host, container in snapshot.containers:
            project = container.labels.get(PROJECT, "")
            if not container.running or not project.startswith(self.prefix) or host not in self.renewed:
                continue
            deadline = self.renewed[host] + self.fence_after
            late = snapshot.wall - deadline
            if late <= 0:
                continue
            known = self.late.get((host, container.id))
            if known is None or late > known.late:
                self.late[(host, container.id)] = Late(host, container.id, project, deadline, late)

    @property
    def worst(self) -> list[Late]:
        return sorted(self.late.values(), key=lambda entry: -entry.late)


__all__ = ["FenceCheck", "Late"]
