"""One look at the fleet, as the soak's checks see it: the projects and Leases as the API lists them and the
Caravanserai containers of every worker's engine (`docker ps`, by project label), with the times they were taken."""

from __future__ import annotations

from dataclasses import dataclass, field

from caravanserai import v1
from support.fleet import EngineContainer, engine_time

PROJECT = "caravanserai.io/project"
SERVICE = "caravanserai.io/service"
GENERATION = "caravanserai.io/generation"
PROJECT_UID = "caravanserai.io/project-uid"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Projects by name (None when the API did not answer), (host, container) pairs of every engine, and each node's
    Lease renew time (wall clock; None when the API did not answer). `at` is monotonic, taken when the snapshot was
    complete; `wall` is the wall clock just before the engines were listed (a container listed as running ran at
    some moment after `wall`)."""

    at: float
    projects: dict[str, v1.Project] | None
    containers: list[tuple[str, EngineContainer]]
    leases: dict[str, float] | None = None
    wall: float = 0.0
    api_wall: float = field(default=0.0)  # wall clock once the API had answered

    def running(self, project: str) -> list[tuple[str, EngineContainer]]:
        return [(h, c) for h, c in self.containers if c.running and c.labels.get(PROJECT) == project]


__all__ = ["GENERATION", "PROJECT", "PROJECT_UID", "SERVICE", "Snapshot", "engine_time"]
