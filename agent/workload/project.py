"""A whole project on Docker: bring it up, observe it, stop it, remove it. Built on `DockerRuntime`.

Guarantees:

* **Idempotent and stateless**: everything is found again through names and labels, so each operation may be
  repeated, interrupted and resumed, by this agent or by a restarted one.
* **Adoption**: a container whose labels show this node, this project uid and the service's current spec hash
  is kept as it is (started again if it should run); any other container under the service's name is replaced.
  A spec change therefore recreates exactly the services whose spec changed: the old container stops first, or,
  with `spec.update.order: start-first`, only once its replacement is healthy (`startfirst`).
* **Images follow `imagePullPolicy`** (`imagepull.prepare_image`), pulled before the old container of a changed
  service is removed; a pull that cannot succeed is a `ServiceFailure` with reason ImagePullFailed (or
  ErrImageNeverPull) and Docker's message; a create or start Docker refuses as invalid (4xx) is a `ServiceFailure`
  too (CreateFailed, StartFailed). A Docker daemon that does not answer raises `DockerUnavailable`: the caller
  retries.
* **What Docker could not make is reported, not hidden**: a network or volume Docker refuses to make, or a
  container create that fails on Docker's side (5xx), is a `SetupFailure` in `Outcome.blocked`; the services
  that could not start wait for it (`Outcome.stuck`: `network: <Docker's message>`), the others are left as they
  are, and the caller retries.
* **Services start in parallel**, in waves that follow `dependsOn` (`ordering.unmet`): a service whose
  dependencies are not met is neither created nor started; what it waits for is returned. Stops and removals
  run in parallel.
* **Networks** come from the node's `NetworkPool` (`netpool`): the one the project's containers are on, else a
  spare pool network, else (no pool) `cara_<project>_<node>`.
* **Removal** takes containers (stop with the configured timeout, then remove), the project's network (a pool
  network is given back to the pool; `cara_<project>_<node>` is removed) and the ephemeral volumes; persistent
  volumes are kept, unless asked (`remove(persistent=True)`, a deletion with `caractrl delete project --volumes`).
  Only objects labelled for this node are touched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import structlog

from caravanserai import v1
from caravanserai.agent.docker import containers, naming
from caravanserai.agent.docker.engine import DockerRefused, DockerRuntime
from caravanserai.agent.docker.records import ContainerSummary, Labelled, Observed
from caravanserai.agent.workload import ordering, projectstatus, startfirst
from caravanserai.agent.workload.failures import (
    CONTAINER,
    NETWORK,
    REASON_CREATE_FAILED,
    REASON_HOST_PATH_NOT_ALLOWED,
    REASON_IMAGE_PULL_FAILED,
    REASON_START_FAILED,
    VOLUME,
    ServiceFailure,
    SetupFailure,
)
from caravanserai.agent.workload.imagepull import UNREPORTED, PullReporter, prepare_image
from caravanserai.agent.workload.netpool import NetworkPool, attached_networks
from caravanserai.clock import Clock, SystemClock
from caravanserai.project import runoptions

log = structlog.get_logger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What bringing a project up found: the containers by service, the first lasting failure if any, what each
    service not started yet waits for (`waiting`: dependsOn, its data, what Docker could not make), the part of
    that which is not mere start-up order (`stuck`: data missing, a `SetupFailure`), and the first thing Docker
    could not make (`blocked`)."""

    observed: dict[str, Observed]
    failure: ServiceFailure | None = None
    waiting: dict[str, str] = field(default_factory=dict)
    stuck: dict[str, str] = field(default_factory=dict)
    blocked: SetupFailure | None = None


HealthView = Callable[[v1.Service, Observed], Observed]
"""Fills in the health of a service's container (the agent's own http/tcp checks); identity by default."""


def _as_observed(service: v1.Service, observed: Observed) -> Observed:
    return observed


async def gather_all(calls: Iterable[Awaitable[T]]) -> list[T | BaseException]:
    """Await every call concurrently; results and exceptions in order (no call is cancelled by another)."""
    return list(await asyncio.gather(*calls, return_exceptions=True))


def _raise_unexpected(results: Iterable[object]) -> None:
    """Re-raise the first exception that is neither a ServiceFailure nor a SetupFailure (e.g. DockerUnavailable)."""
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, (ServiceFailure, SetupFailure)):
            raise result


async def _made(what: str, call: Awaitable[T]) -> T:
    """`call`'s result; Docker's refusal to make the `what` (network, volume) as a `SetupFailure`."""
    try:
        return await call
    except DockerRefused as exc:
        raise SetupFailure(what, exc.message) from exc


class ProjectRuntime:
    """Project-level Docker operations for the agent of `node`."""

    def __init__(
        self,
        runtime: DockerRuntime,
        *,
        node: str,
        stop_timeout: int,
        networks: NetworkPool | None = None,
        allowed_host_paths: tuple[str, ...] = (),
        clock: Clock | None = None,
        on_switch: startfirst.Switched | None = None,
    ) -> None:
        self.docker = runtime
        # `spec.update.order: start-first`; `on_switch` tells this node's ingress that a service's container changed
        self.start_first = startfirst.StartFirst(runtime, node=node, clock=clock or SystemClock(), on_switch=on_switch)
        self.node = node
        self.stop_timeout = stop_timeout
        self.allowed_host_paths = allowed_host_paths  # --allowed-host-paths: empty allows any
        self.networks = networks or NetworkPool(runtime, node=node, size=0)  # no pool: `cara_<project>_<node>`

    def _filter(self, project: str, **extra: str) -> list[str]:
        return naming.node_filter(self.node, project=project, **extra)

    # ---- up ----------------------------------------------------------------------------------------------

    async def ensure(
        self,
        project: v1.Project,
        *,
        with_health: HealthView = _as_observed,
        inputs: containers.ProjectInputs = containers.NO_INPUTS,
        pulls: PullReporter = UNREPORTED,
    ) -> Outcome:
        """Make every service of `project` run as its spec says, in `dependsOn` order; returns what each container
        looks like and what the services not started yet wait for. `with_health` fills in the health of
        containers whose checks the agent runs; `inputs` are what services take from Secrets and Configs (a
        service `inputs.blocked` names waits for its data). A project with a host path this node does not allow
        runs nothing: its outcome is the failure HostPathNotAllowed (the scheduler keeps such projects off the
        node; this is the defence in depth)."""
        refused = self.refused_host_path(project)
        if refused is not None:
            return Outcome({}, refused)
        async with self.networks.busy():
            return await self._ensure(project, with_health=with_health, inputs=inputs, pulls=pulls)

    async def _ensure(
        self, project: v1.Project, *, with_health: HealthView, inputs: containers.ProjectInputs, pulls: PullReporter
    ) -> Outcome:
        kept, attached = await self.remove_stale(project)
        by_name = {s.name: s for s in project.spec.services}
        try:
            network = await self._network_and_volumes(project, attached)
        except SetupFailure as failure:
            current = await self.observe(project, kept)
            observed = {k: with_health(by_name[k], o) for k, o in current.items() if k in by_name}
            held = {s: failure.waits for s in by_name if s not in observed}
            return Outcome(observed, waiting=dict(held), stuck=held, blocked=failure)
        current = await self.observe(project, kept)
        observed = {k: with_health(by_name[k], o) for k, o in current.items() if k in by_name}
        pending, waiting = list(project.spec.services), dict[str, str]()
        failures: list[ServiceFailure] = []
        stuck: dict[str, str] = {}
        blocked: SetupFailure | None = None
        while pending:  # waves: what may start now starts in parallel; what it unblocks goes in the next wave
            wave, waiting = self._next_wave(project, pending, observed, inputs)
            if not wave:
                break
            results = await gather_all(
                self.ensure_service(
                    project,
                    service,
                    inputs.of(service),
                    known=observed.get(service.name),
                    listed=True,
                    pulls=pulls,
                    network=network,
                )
                for service in wave
            )
            _raise_unexpected(results)
            for service, result in zip(wave, results, strict=True):
                if isinstance(result, Observed):
                    observed[service.name] = with_health(service, result)
                elif isinstance(result, ServiceFailure):
                    failures.append(result)
                elif isinstance(result, SetupFailure):
                    blocked = blocked or result
                    stuck[service.name] = result.waits
            pending = [s for s in pending if s.name in waiting]
        stuck.update((s, why) for s, why in inputs.blocked.items() if s in waiting)
        return Outcome(observed, failures[0] if failures else None, {**waiting, **stuck}, stuck, blocked)

    async def _network_and_volumes(self, project: v1.Project, attached: list[str]) -> str:
        """Make the project's network and Docker volumes exist; the network's name. Raises SetupFailure."""
        network = await _made(NETWORK, self.networks.network_for(project, attached))
        await gather_and_raise(
            _made(VOLUME, self.docker.ensure_volume(containers.volume_config(project, volume, node=self.node)))
            for volume in project.spec.volumes
            if containers.volume_type(volume) in containers.DOCKER_VOLUME_TYPES
        )
        return network

    def refused_host_path(self, project: v1.Project) -> ServiceFailure | None:
        """The failure for the first HostPath volume of `project` outside this node's allowed host paths."""
        for volume in project.spec.volumes:
            if volume.type == v1.VOLUME_HOST_PATH and runoptions.uncovered([volume.host_path], self.allowed_host_paths):
                allowed = ", ".join(self.allowed_host_paths)
                return ServiceFailure(
                    REASON_HOST_PATH_NOT_ALLOWED,
                    f"volume {volume.name}: host path {volume.host_path} is not allowed on node {self.node}"
                    f" (its agent allows only {allowed}: --allowed-host-paths)",
                )
        return None

    def _next_wave(
        self,
        project: v1.Project,
        pending: list[v1.Service],
        observed: dict[str, Observed],
        inputs: containers.ProjectInputs,
    ) -> tuple[list[v1.Service], dict[str, str]]:
        """The services of `pending` that may be ensured now, and what the others wait for."""
        wave: list[v1.Service] = []
        waiting: dict[str, str] = {}
        for service in pending:
            found = observed.get(service.name)
            adoptable = found is not None and self._adoptable(project, service, found, inputs.of(service))
            held = (
                "" if adoptable else inputs.blocked.get(service.name) or ordering.unmet(service, project.spec, observed)
            )
            if held:
                waiting[service.name] = held
            else:
                wave.append(service)
        return wave, waiting

    def _adoptable(
        self, project: v1.Project, service: v1.Service, found: Observed, inputs: containers.ServiceInputs
    ) -> bool:
        return (
            found.node == self.node
            and found.project_uid == project.metadata.uid
            and found.spec_hash == containers.service_hash(project, service, inputs.digest)
        )

    async def ensure_service(
        self,
        project: v1.Project,
        service: v1.Service,
        inputs: containers.ServiceInputs | None = None,
        *,
        known: Observed | None = None,
        listed: bool = False,
        pulls: PullReporter = UNREPORTED,
        network: str = "",
    ) -> Observed:
        """Adopt, start or (re)create the service's container with its `inputs` (from Secrets and Configs; none:
        its literal environment) on the project's `network` (see `NetworkPool.network_for`; "": the project's
        own `cara_<project>_<node>`); returns its observed state. `known` is the container as just inspected: an
        adoptable one that needs nothing is returned without asking Docker again. `listed`: the project's containers
        were just listed and `known` is what they hold for the service, so with none the container is created at
        once (a foreign container under its name makes the create fail with Conflict; the next attempt replaces
        it)."""
        inputs = inputs or containers.ServiceInputs.literal(service)
        if (
            known is not None
            and self._adoptable(project, service, known, inputs)
            and not projectstatus.needs_start(service, known)
        ):
            return known
        name = naming.container_name(naming.key_of(project), service.name, self.node)
        found = known if listed else await self.docker.inspect_container(name)
        if found is not None and self._adoptable(project, service, found, inputs):
            if not projectstatus.needs_start(service, found):
                return found
            await self._start(found.container_id, service)
            return await self._observe(found.container_id)
        replacing = found is not None and found.status == projectstatus.RUNNING
        await prepare_image(self.docker, service, inputs, pulls, replacing=replacing)
        if found is not None and startfirst.applies(project, found):
            return await self.start_first.replace(
                project,
                service,
                found,
                create=lambda next_name: self._create(project, service, next_name, inputs, network),
                grace=self._grace(found.stop_timeout),
            )
        if found is not None:
            log.info("replacing container", container=name, reason="spec or owner changed")
            await self.docker.remove_container(found.container_id, timeout=self._grace(found.stop_timeout))
        container_id = await self._create(project, service, name, inputs, network)
        await self._start(container_id, service)
        return await self._observe(container_id)

    async def _create(
        self, project: v1.Project, service: v1.Service, name: str, inputs: containers.ServiceInputs, network: str
    ) -> str:
        config = containers.container_config(project, service, node=self.node, inputs=inputs, network=network)
        try:
            return await self.docker.create_container(name, config)
        except DockerRefused as exc:
            if exc.status == 409:  # the name is taken after all: let the next attempt adopt or replace it
                raise
            if exc.status >= 500:  # Docker's own trouble (resources, a daemon-side error): may pass
                raise SetupFailure(CONTAINER, f"service {service.name}: {exc.message}") from exc
            raise ServiceFailure(REASON_CREATE_FAILED, f"service {service.name}: {exc.message}") from exc

    async def _start(self, container_id: str, service: v1.Service) -> None:
        try:
            await self.docker.start_container(container_id)
        except DockerRefused as exc:
            raise ServiceFailure(REASON_START_FAILED, f"service {service.name}: {exc.message}") from exc

    async def _observe(self, container_id: str) -> Observed:
        found = await self.docker.inspect_container(container_id)
        if found is None:
            raise DockerRefused(404, f"container {container_id[:12]} vanished while starting")
        return found

    async def remove_stale(self, project: v1.Project) -> tuple[list[ContainerSummary], list[str]]:
        """Remove what an older incarnation of the project (other uid) left, containers of services that are no
        longer in the spec, and containers not under their service's name (made under an older naming scheme).
        Returns the containers that stay, and the networks that the project's containers (removed ones too) were
        configured on: the project keeps using its network."""
        name, uid = naming.key_of(project), project.metadata.uid
        expected = {s.name: f"/{naming.container_name(name, s.name, self.node)}" for s in project.spec.services}
        listed, volumes = await asyncio.gather(  # one round trip's wait for both lists
            self.docker.list_containers(self._filter(name)),
            self.docker.list_volumes(self._filter(name, volume_type=containers.VOLUME_EPHEMERAL)),
        )
        stale = {
            c.id: c
            for c in listed
            if c.label(naming.LABEL_PROJECT_UID) != uid or expected.get(c.label(naming.LABEL_SERVICE)) not in c.names
        }
        await gather_and_raise(self.docker.remove_container(c.id, timeout=self.grace(c)) for c in stale.values())
        old_volumes = [v.name for v in volumes if v.label(naming.LABEL_PROJECT_UID) != uid]
        await gather_and_raise(self.docker.remove_volume(v) for v in old_volumes)
        return [c for c in listed if c.id not in stale], attached_networks(listed)

    # ---- observe and stop --------------------------------------------------------------------------------

    async def observe(
        self, project: v1.Project, listed: Sequence[ContainerSummary] | None = None
    ) -> dict[str, Observed]:
        """The containers of the project's current incarnation, by service (inspected concurrently; `listed`:
        the project's containers as just listed, else they are listed here)."""
        if listed is None:
            listed = await self.docker.list_containers(self._filter(naming.key_of(project)))
        items = await gather_all(self.docker.inspect_container(c.id) for c in listed)
        _raise_unexpected(items)
        return {
            item.service: item
            for item in items
            if isinstance(item, Observed) and item.project_uid == project.metadata.uid
        }

    async def restart_service(self, found: Observed) -> None:
        """Restart one container (stop with its service's grace period or the configured timeout, then start):
        Docker does not restart unhealthy containers itself."""
        await self.docker.stop_container(found.container_id, timeout=self._grace(found.stop_timeout))
        await self.docker.start_container(found.container_id)

    def grace(self, container: ContainerSummary) -> int:
        """Seconds `container` gets to stop: its service's grace period (`stopGracePeriod`), else --stop-timeout."""
        return naming.stop_timeout(container.labels, self.stop_timeout)

    def _grace(self, own: int | None) -> int:
        return self.stop_timeout if own is None else own

    async def stop(self, project: str) -> None:
        """Stop the project's running containers (they stay, with their logs)."""
        running = [
            c for c in await self.docker.list_containers(self._filter(project)) if c.state == projectstatus.RUNNING
        ]
        await gather_and_raise(self.docker.stop_container(c.id, timeout=self.grace(c)) for c in running)

    # ---- down --------------------------------------------------------------------------------------------

    async def remove(self, project: str, *, persistent: bool = False) -> int:
        """Remove the project's containers, networks and ephemeral volumes (and, with `persistent`, its Persistent
        volumes: `caractrl delete project --volumes`); returns how many objects went."""
        async with self.networks.busy():
            return await self._remove(project, persistent=persistent)

    async def _remove(self, project: str, *, persistent: bool = False) -> int:
        self.start_first.forget(project)
        found = await self.docker.list_containers(self._filter(project))
        await gather_and_raise(self.docker.remove_container(c.id, timeout=self.grace(c)) for c in found)
        self.networks.give_back(project, attached_networks(found))
        networks = await self.docker.list_networks(self._filter(project))  # `cara_<project>_<node>`, not the pool's
        await gather_and_raise(self.docker.remove_network(n.id) for n in networks)
        volumes = await self.docker.list_volumes(self._filter(project, volume_type=containers.VOLUME_EPHEMERAL))
        if persistent:  # every copy of them on this node (a stale copy of a backed-up volume too)
            volumes += await self.docker.list_volumes(self._filter(project, volume_type=containers.VOLUME_PERSISTENT))
        await gather_and_raise(self.docker.remove_volume(v.name) for v in volumes)
        removed = len(found) + len(networks) + len(volumes)
        if removed:
            log.info("project resources removed", project=project, objects=removed)
        return removed

    async def projects_present(self) -> set[str]:
        """Names of every project that has a container, network or volume of this node on Docker."""
        labels = naming.node_filter(self.node)
        listed: list[Labelled] = [
            *await self.docker.list_containers(labels),
            *await self.docker.list_networks(labels),
            *await self.docker.list_volumes(labels),
        ]
        return {item.project for item in listed if item.project}


async def gather_and_raise(calls: Iterable[Awaitable[object]]) -> None:
    """Await every call concurrently, then raise the first exception if any failed."""
    for result in await gather_all(calls):
        if isinstance(result, BaseException):
            raise result


__all__ = [
    "HealthView",
    "Outcome",
    "ProjectRuntime",
    "REASON_CREATE_FAILED",
    "REASON_IMAGE_PULL_FAILED",
    "REASON_START_FAILED",
    "ServiceFailure",
    "SetupFailure",
    "gather_all",
    "gather_and_raise",
]
