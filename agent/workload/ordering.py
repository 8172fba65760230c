"""Start order from `dependsOn`, as Compose users know it. Pure functions, no I/O.

A service with dependencies is created and started only when every dependency meets its condition:

* `started`: the dependency's container runs (or already completed);
* `healthy`: it runs and its health check passes (Docker's status for exec checks, the agent's for http/tcp);
* `completed`: it exited with code 0 and will not be restarted.

`unmet` says, in words for `describe`, what a service still waits for ("" when nothing). A service that already
has a container of its current spec is never held back: dependencies gate the first start, not later restarts.
"""

from __future__ import annotations

from collections.abc import Mapping

from caravanserai import v1
from caravanserai.agent.docker.records import Observed
from caravanserai.agent.workload.projectstatus import HEALTHY, RUNNING, completed
from caravanserai.project import servicegraph

_WORDS = {servicegraph.STARTED: "start", servicegraph.HEALTHY: "be healthy", servicegraph.COMPLETED: "complete"}


def met(dep: v1.ServiceDependency, target: v1.Service | None, found: Observed | None) -> bool:
    """Whether the dependency `dep` on `target` (whose container is `found`) meets its condition."""
    if target is None or found is None:
        return False
    condition = servicegraph.condition(dep)
    if condition == servicegraph.COMPLETED:
        return completed(target, found)
    if condition == servicegraph.HEALTHY:
        return found.status == RUNNING and found.health == HEALTHY
    return found.status == RUNNING or completed(target, found)


def unmet(service: v1.Service, spec: v1.ProjectSpec, observed: Mapping[str, Observed]) -> str:
    """What `service` waits for, e.g. "db to be healthy, migrate to complete" ("" when its dependencies are met)."""
    by_name = {s.name: s for s in spec.services}
    missing = [
        f"{dep.service} to {_WORDS[servicegraph.condition(dep)]}"
        for dep in service.depends_on
        if not met(dep, by_name.get(dep.service), observed.get(dep.service))
    ]
    return ", ".join(missing)


__all__ = ["met", "unmet"]
