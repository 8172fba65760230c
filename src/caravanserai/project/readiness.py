"""How many of a project's services are ready: the one reading behind `caractrl get`'s READY column, `describe`'s
Ready line and the dashboard's.

* A service **counts as ready** when its status says `ready` (its container runs and, with a health check, is
  healthy) or when it is `completed`: a one-shot job (restart policy Never or OnFailure) that exited 0 did its
  work, so a healthy project whose migration job finished reads `3/3`, not `2/3`.
* The total is the number of services the spec declares (a service without a status yet is not ready).
"""

from __future__ import annotations

from caravanserai import v1

SERVICE_COMPLETED = "completed"
"""`ServiceStatus.state` of a service that ended for good with exit code 0 (the agent's word)."""


def counts_as_ready(status: v1.ServiceStatus) -> bool:
    """Whether the service is ready, or completed (a job that did its work)."""
    return status.ready or status.state == SERVICE_COMPLETED


def ready_services(project: v1.Project) -> tuple[int, int]:
    """(services that count as ready, services declared)."""
    declared = {s.name for s in project.spec.services}
    ready = sum(1 for s in project.status.services if s.name in declared and counts_as_ready(s))
    return ready, len(project.spec.services)


__all__ = ["SERVICE_COMPLETED", "counts_as_ready", "ready_services"]
