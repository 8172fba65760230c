"""The agent's reconciler: one project key at a time, make Docker match the project and report what runs.

`reconcile(name)` reads the project from the informer's cache (read-only; it copies before writing) and acts on
its phase:

| project                              | Docker                                          | status written              |
|--------------------------------------|-------------------------------------------------|-----------------------------|
| absent, or bound to another node     | remove everything labelled for it (fencing)     | none                        |
| Scheduled / Running                  | adopt, start or create each service's container | Running / Failed, services  |
| Failed                               | stop what still runs (containers and logs stay) | service statuses            |
| Terminating                          | remove containers, network, ephemeral volumes   | Terminated, ResourcesRemoved|
| Terminated                           | make sure everything is gone                    | none                        |

Guarantees:

* **Level-based and idempotent**: the key carries no event; reconcile reads the current state, so running it
  again (or after a restart) changes nothing that is already right, and writes nothing unchanged.
* **Compare-and-swap writes, stale reads re-read**: a Conflict, or a FailedPrecondition such as a late Running
  refused because the project is now Terminating, makes reconcile read the project from the API server and
  decide again (at most `STALE_ATTEMPTS` times, then the key is retried with backoff).
* **Retries**: Docker unreachable or an API error raises, so the controller retries with backoff; a project that
  is not yet settled (containers starting or restarting) is looked at again after `resync` seconds even if no
  Docker event arrives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import structlog

from caravanserai import meta, v1
from caravanserai.agent import projectstatus
from caravanserai.agent.project import ProjectRuntime
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import NORMAL, WARNING, EventRecorder, Result
from caravanserai.errors import Conflict, FailedPrecondition, Forbidden, NotFound

log = structlog.get_logger(__name__)

REASON_RESOURCES_REMOVED = "ResourcesRemoved"
STALE_ATTEMPTS = 3


class StaleProject(Exception):
    """The project changed under us (Conflict, FailedPrecondition, NotFound, or Forbidden because it is no longer
    bound here): read it again."""


class ProjectReconciler:
    """Reconciles the projects bound to `node`. `lookup(name)` reads the informer cache (None: absent)."""

    def __init__(
        self,
        *,
        client: Client,
        projects: ProjectRuntime,
        lookup: Callable[[str], v1.Project | None],
        node: str,
        clock: Clock,
        recorder: EventRecorder | None = None,
        resync: float = 30.0,
    ) -> None:
        self._client = client
        self._recorder = recorder
        self._projects = projects
        self._lookup = lookup
        self._node = node
        self._clock = clock
        self._resync = resync

    async def reconcile(self, key: str) -> Result:
        """Reconcile the project named `key` (see the module docstring)."""
        return Result(requeue_after=await self.sync(key))

    async def sync(self, name: str) -> float | None:
        """Reconcile the project `name`; returns seconds after which to look again (None: only on change)."""
        project = self._lookup(name)
        for _ in range(STALE_ATTEMPTS):
            try:
                return await self._sync(name, project)
            except StaleProject:
                project = await self._fetch(name)
        raise Conflict.modified(f"Project {name} (kept changing while being reconciled)")

    async def _fetch(self, name: str) -> v1.Project | None:
        try:
            return await self._client.projects.get(name)
        except (NotFound, Forbidden):  # gone, or no longer bound here (a node may read only its own projects)
            return None

    async def _sync(self, name: str, project: v1.Project | None) -> float | None:
        if project is None or project.status.node_ref != self._node:
            await self._projects.remove(name)
            return None
        phase = project.status.phase
        if phase == v1.TERMINATING:
            await self._terminate(project)
            return None
        if phase == v1.TERMINATED:
            await self._projects.remove(name)
            return None
        if phase == v1.FAILED:
            await self._settle_failed(project)
            return None
        if phase in (v1.SCHEDULED, v1.RUNNING):
            return await self._run(project)
        return None

    async def _run(self, project: v1.Project) -> float | None:
        """Bring the project's containers to their spec and report the verdict."""
        outcome = await self._projects.ensure(project)
        spec = project.spec
        if outcome.failure is not None:
            failure = outcome.failure
            verdict = projectstatus.failure(spec, outcome.observed, reason=failure.reason, message=failure.message)
        else:
            verdict = projectstatus.assess(spec, outcome.observed)
        now = self._clock.now()
        generation = project.metadata.generation
        await self._write(project, lambda p: projectstatus.apply(p, verdict, generation=generation, now=now))
        if verdict.phase is not None and verdict.phase != project.status.phase:
            await self._report(project, verdict.phase, verdict.reason, verdict.message)
        settled = verdict.ready or verdict.phase == v1.FAILED
        return None if settled else self._resync

    async def _settle_failed(self, project: v1.Project) -> None:
        """A Failed project runs nothing: stop what still runs and report the final service states."""
        await self._projects.stop(project.metadata.name)
        observed = await self._projects.observe(project)
        verdict = dataclasses.replace(projectstatus.assess(project.spec, observed), phase=None)
        now = self._clock.now()
        await self._write(project, lambda p: projectstatus.apply(p, verdict, generation=None, now=now))

    async def _terminate(self, project: v1.Project) -> None:
        """Remove every Docker object of the project except persistent volumes, then report Terminated."""
        removed = await self._projects.remove(project.metadata.name)
        message = f"removed {removed} Docker object(s): containers, network and ephemeral volumes"
        now = self._clock.now()

        def terminated(p: v1.Project) -> None:
            meta.set_phase(p, v1.TERMINATED, reason=REASON_RESOURCES_REMOVED, message=message, now=now)
            del p.status.services[:]
            meta.set_condition(
                p.status.conditions,
                v1.CONDITION_READY,
                v1.FALSE,
                reason=REASON_RESOURCES_REMOVED,
                message="project terminated",
                now=now,
            )

        await self._write(project, terminated)
        await self._report(project, v1.TERMINATED, REASON_RESOURCES_REMOVED, message)

    async def _report(self, project: v1.Project, phase: str, reason: str, message: str) -> None:
        """Log a phase change and record it as an Event (Warning for Failed)."""
        name = project.metadata.name
        log.info("project phase changed", project=name, phase=phase, reason=reason, message=message)
        if self._recorder is not None:
            await self._recorder.event(project, WARNING if phase == v1.FAILED else NORMAL, reason, message)

    async def _write(self, project: v1.Project, mutate: Callable[[v1.Project], None]) -> None:
        """Apply `mutate` to a copy and store its status if anything changed (CAS on the version read)."""
        updated = meta.copy(project)
        mutate(updated)
        if updated.status == project.status:
            return
        try:
            await self._client.projects.update_status(updated)
        except (Conflict, FailedPrecondition, NotFound, Forbidden) as exc:
            name = project.metadata.name
            log.debug("project changed while reconciling; reading it again", project=name, error=str(exc))
            raise StaleProject(str(exc)) from exc


__all__ = [
    "ProjectReconciler",
    "REASON_RESOURCES_REMOVED",
    "STALE_ATTEMPTS",
    "StaleProject",
]
