"""Self-fencing: an agent cut off from every apiserver stops its projects' containers before the control plane
runs them elsewhere, so two copies of a project never overlap (Nomad's `stop_after_client_disconnect`, with the
deadline kept in a file the node's watchdog enforces too, as Pacemaker's sbd does with its watchdog).

    fence = SelfFence(fence_after=10.0, clock=clock, projects=runtime, client=client, node="w0", files=files)
    await fence.resume()                         # before anything else: take over the recorded deadline
    Heartbeat(…, on_contact=fence.contact)       # every answered heartbeat, with the time its renewal was stamped
    await fence.run()                            # watches the deadline

Guarantees:

* **Deadline**: `fence_after` seconds after the renewal time of the last heartbeat the API answered (the moment
  the agent stamped the Lease's `renewTime`, not the later moment the answer came: node health counts from the
  stamp) every container of this node has stopped, even one that ignores its stop signal. With `fence_after` equal
  to node health's heartbeat timeout plus grace period (default 90 s + 3 min), that is no later than the moment
  node health moves the node's Running projects. `fence_after = 0` never fences.
* **When the fence starts**: early enough for the slowest stop to end by the deadline (`fencing.stops`): at the
  deadline minus the longest stop timeout of the running containers minus `LEAD_MARGIN`, never before half of
  `fence_after` is left; a stop that cannot fit is a SIGKILL at once. Checked every `fence_after / 10` seconds
  (at most 1 s). The price: a service with a long stop timeout may stop that long before its replacement starts
  (a gap rather than an overlap).
* **Fence first, then renew**: an answered heartbeat that finds the deadline near or past (the agent was frozen,
  or its loop late) first fences as the deadline asks, and only then renews it, so a resumed agent never leaves a
  copy running that the control plane may already have replaced. Likewise at start (`resume`): the deadline a
  previous run recorded (`files`) is taken over, so a restart does not start the count again; one that has passed
  (the agent was down past it, the machine rebooted) is met at once, before the agent does anything else. Without
  a record the start counts as the first answered heartbeat.
* **Shared with the watchdog**: every renewal is written to `files` (`fencing.record`), which the node's watchdog
  (`cara-fence-watchdog`) reads: it meets the same deadline when this process cannot (frozen, killed, stopped).
  So the deadline holds while either of them runs.
* **What**: every running container labelled for this node is stopped; nothing is removed, so logs stay readable.
  While fenced, `fenced` is true and the reconciler leaves Docker and the project statuses alone (a stopped
  container is not a failed project).
* **Back**: at the first answered heartbeat after a fence (its own, or the watchdog's for the same deadline) whose
  renewal leaves more than half of `fence_after` (a renewal stamped before a freeze or a long wait for the network
  and answered only now may leave the deadline near or past: the fence stays for a fresher one), each
  fenced project is read from the API (not the possibly stale cache): one still bound here in Scheduled or Running
  has its stopped containers started again, whatever their restart policy; the others are left to the reconciler,
  which removes them. Only then is `fenced` cleared and every project queued (`on_unfenced`).
* Docker errors while stopping or starting are logged; stops are retried at the next check, starts at the next
  heartbeat; nothing here raises. A record that cannot be written is logged and kept in `record_problem` ("" once
  a write succeeds again; `record_changed` is set at each change), which the agent shows as the Node's
  `FenceUnrecorded` condition: the watchdog cannot meet a deadline it was not told.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from caravanserai import v1
from caravanserai.agent.config import DEFAULT_FENCE_AFTER
from caravanserai.agent.docker import naming
from caravanserai.agent.fencing.record import Deadline, FenceFiles
from caravanserai.agent.fencing.stops import NodeStops, check_interval, projects_of
from caravanserai.agent.workload.project import ProjectRuntime, gather_and_raise
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.errors import CaravanseraiError, Forbidden, NotFound

log = structlog.get_logger(__name__)

EXITED = "exited"


class SelfFence:
    """See the module docstring. `contact(stamped)` is called after every heartbeat the API answered, with the
    monotonic time at which that heartbeat's renewal was stamped."""

    def __init__(
        self,
        *,
        fence_after: float,
        clock: Clock,
        projects: ProjectRuntime,
        client: Client,
        node: str,
        on_unfenced: Callable[[], Awaitable[None]] | None = None,
        files: FenceFiles | None = None,
    ) -> None:
        self.fence_after = fence_after
        self._clock = clock
        self._projects = projects
        self._client = client
        self._node = node
        self.on_unfenced = on_unfenced  # e.g. queue every project
        self._files = files  # the record shared with the watchdog (None: kept in this process only)
        self._boot_id = files.boot_id if files is not None else ""
        self._stops = NodeStops(projects.docker, node=node, stop_timeout=projects.stop_timeout)
        self.deadline = self._deadline_from(clock.monotonic())  # the start counts as contact until `resume`
        self._stopped: set[str] = set()  # projects whose containers the fence stopped
        self._fenced_for: Deadline | None = None  # the deadline the fence met (the watchdog's note names it too)
        self.record_problem = ""  # why the deadline could not be recorded for the watchdog ("" while it can)
        self.record_changed = asyncio.Event()  # set whenever `record_problem` changes
        self.fenced = False  # guarded by the event loop: set by the checks, cleared by contact()
        self.fences = 0  # how many times the agent fenced itself (for tests and logs)

    @property
    def interval(self) -> float:
        return check_interval(self.fence_after)

    def left(self) -> float:
        """Seconds until the deadline (negative once passed; −∞ for a deadline recorded on another boot)."""
        return self.deadline.left(self._clock.monotonic(), self._boot_id)

    async def resume(self) -> None:
        """Before anything else runs: take over the deadline a previous run recorded, or record one from now; meet
        it at once when it has passed (see the module docstring)."""
        recorded = self._files.read_deadline() if self._files is not None else None
        if self.fence_after > 0 and recorded is not None and recorded.armed:
            self.deadline = recorded
        else:
            self._record()  # the first start (or fencing turned on or off): the start counts as contact
        if self.fence_after <= 0:
            return
        left = self.left()
        if left <= 0:
            log.warning("the fence deadline passed while the agent was not running", node=self._node)
        await self._catch_up(left)

    async def contact(self, stamped: float) -> None:
        """The API answered a heartbeat stamped at `stamped` (monotonic): fence first if the deadline came near or
        passed unseen, then renew it, then come back from a fence if there was one."""
        if self.fence_after <= 0:
            return
        if not self.fenced:
            await self._catch_up(self.left())
        self.deadline = self._deadline_from(max(stamped, self.deadline.at - self.fence_after))
        self._record()
        if not self.fenced:
            return
        if self.left() <= self.fence_after / 2:
            log.info("a renewal stamped too long ago does not lift the fence", node=self._node, left=self.left())
            return
        try:
            await self._restart_still_bound()
        except CaravanseraiError as exc:
            log.warning("unfencing failed; retrying at the next heartbeat", node=self._node, error=str(exc))
            return
        self.fenced = False
        self._stopped.clear()
        self._fenced_for = None
        log.info("API reachable again: fence lifted", node=self._node)
        if self.on_unfenced is not None:
            await self.on_unfenced()

    async def run(self) -> None:
        """Check the deadline forever; fence when it comes near enough."""
        if self.fence_after <= 0:
            return
        while True:
            await self._clock.sleep(self.interval)
            left = self.left()
            if self.fenced or left <= self.fence_after / 2:
                await self._check(left)

    def _deadline_from(self, stamped: float) -> Deadline:
        return Deadline(
            at=stamped + self.fence_after,
            boot_id=self._boot_id,
            fence_after=max(0.0, self.fence_after),
            stop_timeout=self._projects.stop_timeout,
        )

    def _record(self) -> None:
        """Write the deadline for the watchdog (and the next run); a failure is logged once until it recovers, and
        kept in `record_problem`."""
        if self._files is None:
            return
        try:
            self._files.write_deadline(self.deadline)
        except OSError as exc:
            problem = f"{type(exc).__name__}: {exc}"
            if not self.record_problem:
                log.error("cannot record the fence deadline for the watchdog", node=self._node, error=problem)
            self._set_problem(problem)
        else:
            self._set_problem("")

    def _set_problem(self, problem: str) -> None:
        if problem != self.record_problem:
            self.record_problem = problem
            self.record_changed.set()

    async def _catch_up(self, left: float) -> None:
        """Not fenced, and `left` seconds to the deadline: fence if it is due; take over the watchdog's fence if it
        met this deadline already (its note names it)."""
        if left > self.fence_after / 2:
            return
        await self._check(left)
        if not self.fenced and self._files is not None and self._files.read_stopped(self.deadline):
            self._fence(left)

    async def _check(self, left: float) -> None:
        """Fence when the slowest stop would otherwise end after the deadline; once fenced, stop what runs."""
        try:
            running = await self._stops.running() if self.fenced else await self._stops.due(left, self.fence_after)
            if running is None:
                return
            self._fence(left)
            self._stopped |= projects_of(running)
            await self._stops.stop(running, left)
        except CaravanseraiError as exc:
            log.warning("fencing: stopping containers failed; retrying", node=self._node, error=str(exc))

    def _fence(self, left: float) -> None:
        if not self.fenced:
            self.fenced = True
            self._fenced_for = self.deadline
            self.fences += 1
            log.warning("no apiserver answered in time: stopping this node's containers", node=self._node, left=left)

    async def _restart_still_bound(self) -> None:
        stopped = set(self._stopped)
        if self._files is not None and self._fenced_for is not None:
            stopped |= self._files.read_stopped(self._fenced_for)  # what the watchdog stopped for the same deadline
        for name in sorted(stopped):
            try:
                project = await self._client.projects.get(name)
            except (NotFound, Forbidden):  # gone, or bound elsewhere now: the reconciler removes it
                continue
            bound = project.status.node_ref == self._node and project.status.phase in (v1.SCHEDULED, v1.RUNNING)
            if not bound:
                continue
            exited = [
                c.id
                for c in await self._projects.docker.list_containers(naming.node_filter(self._node, project=name))
                if c.state == EXITED and c.label(naming.LABEL_PROJECT_UID) == project.metadata.uid
            ]
            await gather_and_raise(self._projects.docker.start_container(cid) for cid in exited)
            log.info("fence lifted: containers started again", project=name, containers=len(exited))


__all__ = ["DEFAULT_FENCE_AFTER", "SelfFence"]
