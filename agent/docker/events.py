"""The Docker events stream: container changes of managed containers wake up their project's reconcile at once.

Guarantees:

* **Filtered at the source**: only container events of containers labelled `caravanserai.io/managed=true` and
  this node's `caravanserai.io/node` are delivered (Docker filters, sent as JSON).
* **Never gives up**: when the stream ends (daemon restart, broken connection) it subscribes again with `since`
  set to the last event it saw, so nothing in between is missed; failures back off from 0.5 s to 10 s.
* **Resync after a gap**: after every re-subscription `on_reconnect` runs (the agent uses it to sweep Docker
  for orphans and re-examine every project), because events may have been lost while disconnected.
* Each event calls `on_project(name)`; the work queue collapses repeated keys, so bursts cost one reconcile.
* A `die` event calls `on_exit(event)` first (its exit code is the only record of an exit once Docker has
  restarted the container: its inspect then says 0), so the reconcile it wakes already knows the code.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import structlog

from caravanserai.agent.docker import naming
from caravanserai.agent.docker.engine import DockerError, DockerRuntime
from caravanserai.agent.docker.records import ContainerEvent, since_text
from caravanserai.backoff import Backoff
from caravanserai.clock import Clock

log = structlog.get_logger(__name__)

# Container actions that can change a project's observed state.
ACTIONS = ("create", "start", "restart", "die", "kill", "oom", "stop", "destroy", "pause", "unpause", "health_status")
# Subscribing again waits 0.5 s after a stream that delivered events, else doubling up to 10 s.
RESUBSCRIBE_BACKOFF = Backoff(initial=0.5, cap=10.0, jitter=0.0, reset_after=None)


class DockerEventWatcher:
    """Follows Docker's events for this node's managed containers; see the module docstring."""

    def __init__(
        self,
        runtime: DockerRuntime,
        *,
        node: str,
        clock: Clock,
        on_project: Callable[[str], None],
        on_reconnect: Callable[[], Awaitable[None]],
        on_exit: Callable[[ContainerEvent], None] = lambda event: None,
    ) -> None:
        self._docker = runtime
        self._node = node
        self._clock = clock
        self._on_project = on_project
        self._on_reconnect = on_reconnect
        self._on_exit = on_exit
        self._since: str | None = None
        self.connected = asyncio.Event()

    async def run(self) -> None:
        """Follow events until cancelled."""
        backoff = RESUBSCRIBE_BACKOFF.start(self._clock)
        first = True
        while True:
            if self._since is None:
                self._since = since_text(int(self._clock.now() * 1_000_000_000))
            try:
                if not first:
                    await self._on_reconnect()
                first = False
                if await self._follow_once(self._since):
                    backoff.reset()
            except DockerError as exc:
                log.warning("docker events failed; subscribing again", error=exc.message)
            except Exception as exc:  # noqa: BLE001 - a resync hook or transport failure must not end the stream
                log.warning("docker events interrupted; subscribing again", error=str(exc))
            self.connected.clear()
            await backoff.wait()

    async def _follow_once(self, since: str) -> bool:
        """One subscription until the stream ends; True when it delivered at least one event."""
        labels = naming.node_filter(self._node)
        stream = self._docker.container_events(labels, actions=ACTIONS, since=since)
        saw_any = False
        self.connected.set()
        async with contextlib.aclosing(stream):
            async for event in stream:
                saw_any = True
                self._handle(event)
        return saw_any

    def _handle(self, event: ContainerEvent) -> None:
        if event.time_nano is not None:
            self._since = since_text(event.time_nano)
        if event.project and event.action == "die" and event.exit_code is not None:
            self._on_exit(event)
        if event.project:
            self._on_project(event.project)


__all__ = ["ACTIONS", "DockerEventWatcher"]
