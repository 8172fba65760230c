"""Start-first replacement of a changed service (`spec.update.order: start-first`), the Swarm way.

    observed = await StartFirst(docker, node="n1", clock=clock, on_switch=ingress.switched).replace(
        project, service, old, create=make_container)

Guarantees:

1. **Both run for a while.** The new container is created under the service's *next* name
   (`naming.replacement_name`) and started next to the old one, with the same network alias: the service's name
   answers from either meanwhile.
2. **Healthy before it serves.** The new container must become healthy within its check's start period plus
   `retries + 1` intervals: Docker's status for an `exec` check; one passing probe of the agent's own
   (`health.probe_once`, every interval but at least every `PROBE_EVERY`) for an `http` or `tcp` check; running,
   without a check.
3. **The switch, then the stop.** The old container takes the *old* name, the new one the service's name, and
   `on_switch(project, service)` tells this node's ingress to find the service's address afresh: new requests go
   to the new container. Only then is the old one stopped (its grace period lets requests in flight finish) and
   removed.
4. **A replacement that does not become healthy changes nothing but is said.** The new container is removed, the
   old one keeps running and serving, and `replace` raises a `SetupFailure` (REPLACEMENT, reason
   StartFirstFailed) naming the service and why (it stopped, or did not pass its health check in time): the
   reconciler reports it as every setup failure (the service's message, a Warning Event) and looks again with
   backoff.
5. **A failed replacement is not retried at every look.** The same replacement (the project's uid and generation)
   is tried again only after `RETRY` (10 s doubling up to 5 minutes, as Kubernetes' crash-loop backoff): a look
   before that — a Docker event, the reconciler's own retry — raises the last failure again without making a
   container. A new spec (a fix, a restart) is tried at once; success or the project's removal (`forget`) ends
   the backoff.
6. **Interruptions leave nothing behind.** An agent stopped half-way leaves a next or old container, which is not
   under its service's name: `ProjectRuntime.remove_stale` removes it at the next reconcile.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.agent.docker.records import Observed
from caravanserai.agent.workload import health, projectstatus
from caravanserai.agent.workload.failures import REPLACEMENT, SetupFailure
from caravanserai.backoff import Backoff, BackoffState
from caravanserai.clock import Clock
from caravanserai.project.servicegraph import HealthSettings

log = structlog.get_logger(__name__)

POLL = 0.25  # seconds between looks at a new container with an exec check or none
PROBE_EVERY = 1.0  # seconds between the agent's probes of a new container at most (its check's interval if shorter)
RETRY = Backoff(initial=10.0, cap=300.0, jitter=0.1, reset_after=None)  # after a replacement that did not serve

Switched = Callable[[str, str], None]
"""`on_switch(project, service)`: the service's container changed; find its address afresh."""


def applies(project: v1.Project, old: Observed | None) -> bool:
    """Whether a changed service of `project` whose container is `old` is replaced start-first: asked by the
    spec, and the old container runs (a stopped one has nothing to keep serving)."""
    return (
        project.spec.update.order == v1.UPDATE_START_FIRST and old is not None and old.status == projectstatus.RUNNING
    )


@dataclass(slots=True)
class _Failed:
    """The last failed replacement of one service: of which project incarnation and spec, why, and when the next
    try may be made (monotonic)."""

    uid: str
    generation: int
    message: str
    retries: BackoffState
    not_before: float


class StartFirst:
    """Replaces running containers start-first on the node `node` (see the module docstring)."""

    def __init__(self, docker: DockerRuntime, *, node: str, clock: Clock, on_switch: Switched | None = None) -> None:
        self.docker = docker
        self.node = node
        self.clock = clock
        self.on_switch = on_switch
        self._failed: dict[tuple[str, str], _Failed] = {}  # (project, service) → its last failed replacement

    def forget(self, project: str) -> None:
        """Drop what is remembered of the project's failed replacements (it is gone from this node)."""
        project = naming.project_key(project)
        for key in [k for k in self._failed if k[0] == project]:
            del self._failed[key]

    def _held(self, project: v1.Project, service: str) -> _Failed | None:
        """The last failure of this same replacement (same uid and generation), None when there is none."""
        last = self._failed.get((naming.key_of(project), service))
        same = last is not None and (last.uid, last.generation) == (project.metadata.uid, project.metadata.generation)
        return last if same else None

    def _fail(self, project: v1.Project, service: str, message: str) -> SetupFailure:
        """Remember a failed replacement (backing off from the last failure of the same one); the failure."""
        last = self._held(project, service)
        retries = last.retries if last is not None else RETRY.start(self.clock)
        self._failed[(naming.key_of(project), service)] = _Failed(
            project.metadata.uid,
            project.metadata.generation,
            message,
            retries,
            self.clock.monotonic() + retries.next_delay(),
        )
        return SetupFailure(REPLACEMENT, message)

    async def replace(
        self,
        project: v1.Project,
        service: v1.Service,
        old: Observed,
        *,
        create: Callable[[str], Awaitable[str]],
        grace: int,
    ) -> Observed:
        """Start the new container (`create(name)` makes it, returns its id), wait until it is healthy, switch,
        then stop and remove `old` within `grace` seconds; the service's container afterwards. SetupFailure
        (REPLACEMENT) when the new one did not become healthy: it is removed, `old` runs on."""
        name = naming.key_of(project)
        last = self._held(project, service.name)
        if last is not None and self.clock.monotonic() < last.not_before:
            raise SetupFailure(REPLACEMENT, last.message)  # not yet: the old container serves on
        next_name = naming.replacement_name(name, service.name, self.node, naming.NEXT)
        leftover = await self.docker.inspect_container(next_name)
        if leftover is not None:
            await self.docker.remove_container(leftover.container_id, timeout=0)
        new_id = await create(next_name)
        await self.docker.start_container(new_id)
        ready = await self._healthy(service, new_id)
        if isinstance(ready, str):
            await self.docker.remove_container(new_id, timeout=0)
            why = f"service {service.name}: {ready} (start-first); the old container keeps serving"
            raise self._fail(project, service.name, why)
        self._failed.pop((name, service.name), None)
        await self.docker.rename_container(
            old.container_id, naming.replacement_name(name, service.name, self.node, naming.OLD)
        )
        await self.docker.rename_container(new_id, naming.container_name(name, service.name, self.node))
        if self.on_switch is not None:
            self.on_switch(name, service.name)
        log.info("switched to the new container", project=name, service=service.name, container=new_id[:12])
        await self.docker.remove_container(old.container_id, timeout=grace)
        found = await self.docker.inspect_container(new_id)
        return found or ready

    async def _healthy(self, service: v1.Service, container_id: str) -> Observed | str:
        """The new container once healthy (running, without a check); why not when it stopped or time ran out."""
        check = service.healthcheck if service.HasField("healthcheck") else None
        settings = HealthSettings.of(check) if check is not None else None
        probed = check is not None and (check.HasField("http") or check.HasField("tcp"))
        wait = 0.0 if settings is None else settings.start_period + settings.interval * (settings.retries + 1)
        deadline = self.clock.monotonic() + wait
        while True:
            found = await self.docker.inspect_container(container_id)
            if found is None:
                return "its new container vanished"
            if found.status != projectstatus.RUNNING:
                return f"its new container stopped ({found.status}, exit code {found.exit_code})"
            if check is None or (not probed and found.health == health.HEALTHY):
                return found
            if (
                probed
                and found.ip
                and settings is not None
                and await health.probe_once(check, found.ip, settings.timeout)
            ):
                return found
            if self.clock.monotonic() >= deadline:
                return f"its new container did not pass its health check within {wait:g}s"
            await self.clock.sleep(min(settings.interval, PROBE_EVERY) if probed and settings is not None else POLL)


__all__ = ["POLL", "PROBE_EVERY", "RETRY", "StartFirst", "Switched", "applies"]
