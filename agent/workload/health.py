"""The agent's own health checks: `http` and `tcp` probes against containers on their project network.

(`exec` checks are Docker's HEALTHCHECK: Docker runs them and reports the status in the container's state.)

    prober = HealthProber(clock=clock, on_change=controller.enqueue)
    prober.track(project, service, container_id=…, address=…, check=…)   # after each reconcile
    prober.status(container_id)                                          # "starting", "healthy", "unhealthy"
    await prober.run()                                                   # probes what is due, forever

Guarantees (Docker's HEALTHCHECK semantics):

* A tracked container starts `starting`; one passing probe makes it `healthy`; `retries` consecutive failing
  probes make it `unhealthy`, except that failures during `startPeriod` (from when it was first tracked, i.e.
  started) are not counted. A passing probe resets the count.
* Probes run every `interval`, each limited by `timeout`; probes of different containers run concurrently.
* `on_change(project)` is called after a container's status changed, so the project is reconciled at once.
* Tracking a new container id for a service forgets the old one (a recreated or restarted container starts
  over); `forget_except` drops containers that are gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

import structlog

from caravanserai import v1
from caravanserai.clock import Clock
from caravanserai.project import servicegraph
from caravanserai.project.servicegraph import HealthSettings

log = structlog.get_logger(__name__)

STARTING = "starting"
HEALTHY = "healthy"
UNHEALTHY = "unhealthy"
TICK = 0.2  # seconds between looks for due probes

Probe = Callable[[v1.HealthCheck, str, float], Awaitable[bool]]


async def probe_once(check: v1.HealthCheck, address: str, timeout: float) -> bool:
    """One probe of `address`: a TCP connect, or an HTTP/1.0 GET whose status is in the expected range."""
    try:
        async with asyncio.timeout(timeout):
            if check.HasField("tcp"):
                _, writer = await asyncio.open_connection(address, check.tcp.port)
                writer.close()
                return True
            return await _http_get(check.http, address)
    except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError):
        return False


async def _http_get(check: v1.HttpCheck, address: str) -> bool:
    reader, writer = await asyncio.open_connection(address, check.port)
    try:
        request = f"GET {check.path or '/'} HTTP/1.0\r\nHost: {address}:{check.port}\r\nUser-Agent: cara-agent\r\n\r\n"
        writer.write(request.encode())
        await writer.drain()
        status_line = (await reader.readline()).decode("latin-1").split()
        if len(status_line) < 2 or not status_line[1].isdigit():
            return False
        low, high = servicegraph.parse_status_range(check.expected_status)
        return low <= int(status_line[1]) <= high
    finally:
        writer.close()


@dataclass(slots=True)
class _Target:
    project: str
    service: str
    container_id: str
    address: str
    check: v1.HealthCheck
    settings: HealthSettings
    tracked_at: float  # monotonic
    next_due: float  # monotonic
    failures: int = 0
    status: str = STARTING


class HealthProber:
    """Runs the http/tcp health checks of the containers it is told to track. See the module docstring."""

    def __init__(self, *, clock: Clock, on_change: Callable[[str], object], probe: Probe = probe_once) -> None:
        self._clock = clock
        self._on_change = on_change
        self._probe = probe
        self._targets: dict[tuple[str, str], _Target] = {}  # (project, service) → its current container

    def track(self, project: str, service: str, *, container_id: str, address: str, check: v1.HealthCheck) -> None:
        """Probe `container_id` of `service` at `address` with `check` (idempotent for the same container)."""
        current = self._targets.get((project, service))
        if current is not None and current.container_id == container_id and current.address == address:
            return
        now = self._clock.monotonic()
        settings = HealthSettings.of(check)
        self._targets[(project, service)] = _Target(
            project, service, container_id, address, check, settings, tracked_at=now, next_due=now
        )

    def forget_except(self, project: str, container_ids: Collection[str]) -> None:
        """Stop probing the project's containers that are not in `container_ids`."""
        for key in [k for k, t in self._targets.items() if k[0] == project and t.container_id not in container_ids]:
            del self._targets[key]

    def status(self, container_id: str) -> str:
        """The container's health ("" when it is not tracked)."""
        for target in self._targets.values():
            if target.container_id == container_id:
                return target.status
        return ""

    async def run(self) -> None:
        """Probe due containers forever (until cancelled)."""
        while True:
            await self.probe_due()
            await self._clock.sleep(TICK)

    async def probe_due(self) -> None:
        """Run every due probe once, concurrently, and record the outcomes."""
        now = self._clock.monotonic()
        due = [t for t in self._targets.values() if t.next_due <= now]
        for target in due:
            target.next_due = now + target.settings.interval
        outcomes = await asyncio.gather(
            *(self._probe(t.check, t.address, t.settings.timeout) for t in due), return_exceptions=True
        )
        for target, outcome in zip(due, outcomes, strict=True):
            self._record(target, outcome is True)

    def _record(self, target: _Target, passed: bool) -> None:
        key = (target.project, target.service)
        if self._targets.get(key) is not target:
            return  # replaced while probing
        before = target.status
        if passed:
            target.failures, target.status = 0, HEALTHY
        elif self._clock.monotonic() - target.tracked_at >= target.settings.start_period:
            target.failures += 1
            if target.failures >= target.settings.retries:
                target.status = UNHEALTHY
        if target.status != before:
            log.info("health changed", project=target.project, service=target.service, health=target.status)
            self._on_change(target.project)


__all__ = ["HEALTHY", "HealthProber", "Probe", "STARTING", "TICK", "UNHEALTHY", "probe_once"]
