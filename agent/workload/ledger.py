"""What the agent knows about containers that Docker does not keep: restarts for failed health checks, and the
exit code of a container Docker restarted (Docker's inspect says 0 again once the container runs).

* `restarted` counts a restart of one container of a service; the count is per container (a recreated
  container starts from zero; the status keeps the highest count it reported for the same container, so an
  agent restart does not make a count go backwards).
* A service restarted for its health stays "health-restarted" until it is seen healthy again (the project is
  Degraded meanwhile).
* `exited` records the exit code of a container's last exit, from Docker's `die` event; it is reported as the
  service's `lastExitCode` while that container lives (only the last container of a service is remembered).
* `context` turns this into the `projectstatus.Context` of one assessment. Memory only; `forget` drops a project.
"""

from __future__ import annotations

from collections.abc import Mapping

from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.records import Observed
from caravanserai.agent.workload import projectstatus


class RestartLedger:
    """Per-container restart counts made by the agent, and services restarted for health not healthy since."""

    def __init__(self) -> None:
        self._restarts: dict[tuple[str, str, str], int] = {}  # (project, service, container id) → restarts
        self._health_restarted: set[tuple[str, str]] = set()  # (project, service)
        self._exits: dict[tuple[str, str], tuple[str, int]] = {}  # (project, service) → (container id, exit code)

    def restarted(self, project: str, service: str, container_id: str) -> None:
        key = (project, service, container_id)
        self._restarts[key] = self._restarts.get(key, 0) + 1
        self._health_restarted.add((project, service))

    def exited(self, project: str, service: str, container_id: str, exit_code: int) -> None:
        """The container `container_id` of the service exited with `exit_code` (Docker's `die` event)."""
        self._exits[(project, service)] = (container_id, exit_code)

    def saw_health(self, project: str, service: str, health: str) -> None:
        if health == projectstatus.HEALTHY:
            self._health_restarted.discard((project, service))

    def forget(self, project: str) -> None:
        self._restarts = {k: n for k, n in self._restarts.items() if k[0] != project}
        self._health_restarted = {k for k in self._health_restarted if k[0] != project}
        self._exits = {k: v for k, v in self._exits.items() if k[0] != project}

    def context(
        self, project: v1.Project, observed: Mapping[str, Observed], waiting: Mapping[str, str], *, now: float
    ) -> projectstatus.Context:
        name = naming.key_of(project)
        return projectstatus.Context(
            waiting=dict(waiting),
            agent_restarts={s: self._restarts.get((name, s, o.container_id), 0) for s, o in observed.items()},
            health_restarted={s for p, s in self._health_restarted if p == name},
            previous={s.name: s for s in project.status.services},
            now=now,
            last_exits={
                s: exit[1]
                for s, o in observed.items()
                if (exit := self._exits.get((name, s))) is not None and exit[0] == o.container_id
            },
        )


__all__ = ["RestartLedger"]
