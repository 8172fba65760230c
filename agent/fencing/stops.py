"""Stopping every container of a node so that each stop has ended by a deadline: the one mechanism of both the
agent's self-fence and the node's watchdog.

    stops = NodeStops(docker, node="w0", stop_timeout=10)
    running = await stops.due(left, fence_after)     # None: not yet
    if running is not None:
        await stops.stop(running, left)              # every stop over by the deadline, SIGKILL included

Guarantees:

* **Due early enough** (`due`): the fence is due once the time left before the deadline is no more than the
  longest stop timeout of the running containers (their services' `stopGracePeriod`, labelled at creation, else
  the agent's `--stop-timeout`) plus `LEAD_MARGIN` (one check interval of at most 1 s plus `KILL_SLACK`), and at
  once when nothing runs. Containers are listed only once half of `fence_after` is left (or less), so a node that
  hears from the control plane never lists them for this.
* **Every stop fits** (`stop`): each container gets its stop timeout, cut to what is left before the deadline less
  `KILL_SLACK` (Docker's time to kill and reap): a stop that cannot fit is a SIGKILL at once. Nothing is removed, so
  logs stay readable. Docker errors are raised (`CaravanseraiError`) after every stop was tried.
* **What**: every running container labelled for the node (`naming.node_filter`), whatever its project.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol

from caravanserai.agent.docker import naming
from caravanserai.agent.docker.records import ContainerSummary
from caravanserai.agent.workload.project import gather_and_raise

RUNNING = "running"
KILL_SLACK = 0.5
"""Seconds kept between a stop's SIGKILL and the deadline, for Docker to kill and reap the container."""
LEAD_MARGIN = 1.0 + KILL_SLACK
"""Seconds the fence starts ahead of the longest stop timeout: one check interval (at most 1 s) plus `KILL_SLACK`."""


class ContainerStops(Protocol):
    """What fencing needs of Docker (`DockerRuntime` has it)."""

    async def list_containers(self, label_filter: list[str]) -> list[ContainerSummary]: ...

    async def stop_container(self, container_id: str, *, timeout: int) -> None: ...


def check_interval(fence_after: float) -> float:
    """Seconds between looks at a deadline: a tenth of `fence_after`, at most 1 s."""
    return min(1.0, fence_after / 10)


class NodeStops:
    """See the module docstring."""

    def __init__(self, docker: ContainerStops, *, node: str, stop_timeout: int) -> None:
        self.docker = docker
        self.node = node
        self.stop_timeout = stop_timeout  # for containers without a stopGracePeriod label

    async def running(self) -> list[ContainerSummary]:
        """The node's running containers."""
        return [c for c in await self.docker.list_containers(naming.node_filter(self.node)) if c.state == RUNNING]

    async def due(self, left: float, fence_after: float) -> list[ContainerSummary] | None:
        """The running containers when the fence is due with `left` seconds to the deadline; None when not yet."""
        if left > fence_after / 2:
            return None
        running = await self.running()
        return running if left <= self.lead(running) else None

    def lead(self, running: list[ContainerSummary]) -> float:
        """How long before the deadline the fence starts: the longest stop timeout plus `LEAD_MARGIN` (0 when
        nothing runs)."""
        if not running:
            return 0.0
        return max(naming.stop_timeout(c.labels, self.stop_timeout) for c in running) + LEAD_MARGIN

    def timeout(self, labels: Mapping[str, str], left: float) -> int:
        """A container's stop timeout, cut to what is left before the deadline (0: SIGKILL at once)."""
        fits = math.floor(left - KILL_SLACK) if math.isfinite(left) else (0 if left < 0 else self.stop_timeout)
        return max(0, min(naming.stop_timeout(labels, self.stop_timeout), fits))

    async def stop(self, running: list[ContainerSummary], left: float) -> None:
        """Stop `running` so that every stop ends by the deadline `left` seconds away."""
        await gather_and_raise(self.docker.stop_container(c.id, timeout=self.timeout(c.labels, left)) for c in running)


def projects_of(containers: list[ContainerSummary]) -> set[str]:
    """The keys of the projects `containers` belong to (`default` for containers labelled before namespaces)."""
    return {c.project for c in containers if c.project}


__all__ = ["KILL_SLACK", "LEAD_MARGIN", "RUNNING", "ContainerStops", "NodeStops", "check_interval", "projects_of"]
