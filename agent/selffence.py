"""Self-fencing: an agent cut off from every apiserver stops its projects' containers before the control plane
runs them elsewhere, so two copies of a project never overlap for long (Nomad's `stop_after_client_disconnect`).

    fence = SelfFence(fence_after=10.0, clock=clock, projects=runtime, client=client, node="w0")
    Heartbeat(…, on_contact=fence.contact)     # every answered heartbeat
    await fence.run()                            # watches the time since the last answer

Guarantees:

* **Deadline**: `fence_after` seconds after the last heartbeat the API answered (default: the control plane's
  heartbeat timeout plus its grace period, 90 s + 3 min, the moment node health moves Running projects away; set
  it to those of your controllers), every container of this node has stopped, even one that ignores its stop
  signal. `fence_after = 0` never fences.
* **When the fence starts**: early enough for the slowest stop to end by the deadline: at `fence_after` minus the
  longest stop timeout of the running containers (their services' `stopGracePeriod`, else the agent's
  `--stop-timeout`) minus `LEAD_MARGIN` (one check interval plus Docker's kill), but never before half of
  `fence_after`. Each container gets its stop timeout, shortened to the time left before the deadline (less
  `KILL_SLACK`): a stop that cannot fit is a SIGKILL at once. Checked every `fence_after / 10` seconds (at most
  1 s); the containers are listed only once half of `fence_after` has passed without an answer.
* **What**: every running container labelled for this node is stopped; nothing is removed, so logs stay
  readable. While fenced, `fenced` is true and the reconciler leaves Docker and the project statuses alone (a
  stopped container is not a failed project). The price of the early start: a service with a long stop timeout
  is stopped up to that long before the control plane starts its replacement (a gap rather than an overlap).
* **Back**: at the first answered heartbeat after fencing, each fenced project is read from the API (not the
  possibly stale cache): one still bound here in Scheduled or Running has its stopped containers started again,
  whatever their restart policy; the others are left to the reconciler, which removes them. Only then is
  `fenced` cleared and every project queued (`on_unfenced`).
* Docker errors while stopping or starting are logged and retried at the next check; nothing here raises.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping

import structlog

from caravanserai import v1
from caravanserai.agent.config import DEFAULT_FENCE_AFTER
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.records import ContainerSummary
from caravanserai.agent.workload.project import ProjectRuntime, gather_and_raise
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.errors import CaravanseraiError, Forbidden, NotFound

log = structlog.get_logger(__name__)

RUNNING = "running"
EXITED = "exited"
KILL_SLACK = 0.5
"""Seconds kept between a stop's SIGKILL and the deadline, for Docker to kill and reap the container."""
LEAD_MARGIN = 1.0 + KILL_SLACK
"""Seconds the fence starts ahead of the longest stop timeout: one check interval (at most 1 s) plus `KILL_SLACK`."""


class SelfFence:
    """See the module docstring. `contact()` is called after every heartbeat the API answered."""

    def __init__(
        self,
        *,
        fence_after: float,
        clock: Clock,
        projects: ProjectRuntime,
        client: Client,
        node: str,
        on_unfenced: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.fence_after = fence_after
        self._clock = clock
        self._projects = projects
        self._client = client
        self._node = node
        self.on_unfenced = on_unfenced  # e.g. queue every project
        self._last_contact = clock.monotonic()  # the start counts as contact: no fencing before the first try
        self._stopped: set[str] = set()  # projects whose containers the fence stopped
        self.fenced = False  # guarded by the event loop: set by run(), cleared by contact()
        self.fences = 0  # how many times the agent fenced itself (for tests and logs)

    @property
    def interval(self) -> float:
        return min(1.0, self.fence_after / 10)

    async def contact(self) -> None:
        """The API answered: remember when, and come back from a fence if there was one."""
        self._last_contact = self._clock.monotonic()
        if not self.fenced:
            return
        try:
            await self._restart_still_bound()
        except CaravanseraiError as exc:
            log.warning("unfencing failed; retrying at the next heartbeat", node=self._node, error=str(exc))
            return
        self.fenced = False
        self._stopped.clear()
        log.info("API reachable again: fence lifted", node=self._node)
        if self.on_unfenced is not None:
            await self.on_unfenced()

    async def run(self) -> None:
        """Check the time since the last contact forever; fence when it reaches `fence_after`."""
        if self.fence_after <= 0:
            return
        while True:
            await self._clock.sleep(self.interval)
            silent = self._clock.monotonic() - self._last_contact
            if self.fenced or silent >= self.fence_after / 2:
                await self._check(silent)

    async def _check(self, silent: float) -> None:
        """Fence when the slowest stop would otherwise end after the deadline; once fenced, stop what runs."""
        try:
            running = [
                c
                for c in await self._projects.docker.list_containers(naming.node_filter(self._node))
                if c.state == RUNNING
            ]
            if not self.fenced and silent < self.fence_after - self._lead(running):
                return
            self._fence(silent)
            self._stopped.update(c.project for c in running if c.project)
            await gather_and_raise(
                self._projects.docker.stop_container(c.id, timeout=self._timeout(c.labels, silent)) for c in running
            )
        except CaravanseraiError as exc:
            log.warning("fencing: stopping containers failed; retrying", node=self._node, error=str(exc))

    def _fence(self, silent: float) -> None:
        if not self.fenced:
            self.fenced = True
            self.fences += 1
            log.warning("no apiserver answered: stopping this node's containers", node=self._node, silent=silent)

    def _lead(self, running: list[ContainerSummary]) -> float:
        """How long before the deadline the fence starts: the longest stop timeout plus `LEAD_MARGIN` (0 when
        nothing runs)."""
        if not running:
            return 0.0
        default = self._projects.stop_timeout
        return max(naming.stop_timeout(c.labels, default) for c in running) + LEAD_MARGIN

    def _timeout(self, labels: Mapping[str, str], silent: float) -> int:
        """A container's stop timeout, cut to what is left before the deadline (0: SIGKILL at once)."""
        left = math.floor(self.fence_after - silent - KILL_SLACK)
        return max(0, min(naming.stop_timeout(labels, self._projects.stop_timeout), left))

    async def _restart_still_bound(self) -> None:
        for name in sorted(self._stopped):
            try:
                project = await self._client.projects.get(name)
            except (NotFound, Forbidden):  # gone, or bound elsewhere now: the reconciler removes it
                continue
            bound = project.status.node_ref == self._node and project.status.phase in (v1.SCHEDULED, v1.RUNNING)
            if not bound:
                continue
            stopped = [
                c.id
                for c in await self._projects.docker.list_containers(naming.node_filter(self._node, project=name))
                if c.state == EXITED and c.label(naming.LABEL_PROJECT_UID) == project.metadata.uid
            ]
            await gather_and_raise(self._projects.docker.start_container(cid) for cid in stopped)
            log.info("fence lifted: containers started again", project=name, containers=len(stopped))


__all__ = ["DEFAULT_FENCE_AFTER", "SelfFence"]
