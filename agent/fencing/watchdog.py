"""The node's fence watchdog (`cara-fence-watchdog`): a process apart from the agent that meets the agent's fence
deadline when the agent cannot: frozen (SIGSTOP, a stuck event loop), killed and not back yet, or stopped.

    watchdog = FenceWatchdog(FenceFiles(Path("/var/lib/caravanserai/fence"), "w0"), docker, clock=SystemClock())
    await watchdog.run()

Guarantees:

* **The agent's deadline, the agent's stops**: it reads the agent's record (`record.FenceFiles`) every check
  interval (that of the recorded `fence_after`, at most 1 s; 1 s while there is no record) and stops the node's
  containers exactly as the agent's self-fence would (`stops.NodeStops`): from the deadline minus the longest stop
  timeout minus the margin, every stop over by the deadline, SIGKILL included. A record written on another boot
  has passed: what Docker restarted at boot is stopped at once.
* **Only on silence**: it acts only on an armed record whose deadline is near or past. A renewed deadline (the
  agent heard from the control plane again) ends its fence; no record, or a disarmed one (`--fence-after 0`), means
  nothing to do. It never starts a container: the agent, back, starts again what is still bound to the node, from
  the watchdog's note of the projects it stopped (`FenceFiles.write_stopped`, for that deadline).
* **Keeps at it**: while the same deadline stays passed, whatever runs again is stopped again at every check.
* **Small and apart**: no API client, no listener; only the record and Docker. Docker errors, and a note that cannot
  be written, are logged and tried again at the next check; nothing here raises.
"""

from __future__ import annotations

import structlog

from caravanserai.agent.fencing.record import Deadline, FenceFiles
from caravanserai.agent.fencing.stops import ContainerStops, NodeStops, check_interval, projects_of
from caravanserai.clock import Clock
from caravanserai.errors import CaravanseraiError

log = structlog.get_logger(__name__)

IDLE_INTERVAL = 1.0
"""Seconds between looks while there is no armed record."""


class FenceWatchdog:
    """See the module docstring."""

    def __init__(self, files: FenceFiles, docker: ContainerStops, *, clock: Clock) -> None:
        self.files = files
        self.docker = docker
        self.clock = clock
        self.engaged: Deadline | None = None  # the deadline it is fencing for (None: not fencing)
        self.stopped: set[str] = set()  # projects it stopped for `engaged`
        self.fences = 0  # how many deadlines it had to meet (for tests and logs)
        self._interval = IDLE_INTERVAL
        self._unwritten = False  # the note grew but could not be written yet

    async def run(self) -> None:
        """Look at the record every check interval, forever."""
        log.info("fence watchdog watching", node=self.files.node, record=str(self.files.deadline_path))
        while True:
            await self.clock.sleep(self._interval)
            await self.look()

    async def look(self) -> None:
        """One look at the record: fence when its deadline asks for it, stand down when it was renewed."""
        deadline = self.files.read_deadline()
        if deadline is None or not deadline.armed:
            self._stand_down()
            self._interval = IDLE_INTERVAL
            return
        self._interval = check_interval(deadline.fence_after)
        if deadline != self.engaged:
            self._stand_down()
        left = deadline.left(self.clock.monotonic(), self.files.boot_id)
        if self.engaged is None and left > deadline.fence_after / 2:
            return
        stops = NodeStops(self.docker, node=self.files.node, stop_timeout=deadline.stop_timeout)
        try:
            running = await stops.running() if self.engaged is not None else await stops.due(left, deadline.fence_after)
            if running is None:
                return
            self._engage(deadline, left)
            self._note(projects_of(running))
            await stops.stop(running, left)
        except CaravanseraiError as exc:
            log.warning("fence watchdog: stopping containers failed; retrying", node=self.files.node, error=str(exc))

    def _engage(self, deadline: Deadline, left: float) -> None:
        if self.engaged is None:
            self.engaged = deadline
            self.fences += 1
            log.warning(
                "the agent did not renew its fence deadline: stopping this node's containers",
                node=self.files.node,
                left=left,
            )

    def _note(self, projects: set[str]) -> None:
        """Add `projects` to the note for the engaged deadline (written when it grows, or until a write works)."""
        grown = self.stopped | projects
        if self.engaged is None or (grown == self.stopped and not self._unwritten):
            return
        self.stopped = grown
        try:
            self.files.write_stopped(self.engaged, self.stopped)
        except OSError as exc:
            self._unwritten = True
            log.error("fence watchdog: cannot write its note", node=self.files.node, error=str(exc))
        else:
            self._unwritten = False

    def _stand_down(self) -> None:
        if self.engaged is not None:
            log.info("fence deadline renewed or disarmed: the agent takes over", node=self.files.node)
        self.engaged = None
        self.stopped = set()
        self._unwritten = False


__all__ = ["IDLE_INTERVAL", "FenceWatchdog"]
