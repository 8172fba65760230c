"""The agent's reconciler: one project key at a time, make Docker match the project and report what runs.

`reconcile(name)` reads the project from the informer's cache (read-only; it copies before writing) and acts on
its phase:

| project                              | Docker                                          | status written              |
|--------------------------------------|-------------------------------------------------|-----------------------------|
| absent, or bound to another node     | remove everything labelled for it (fencing),    | none                        |
|                                      | unless moved away with a hand-off still running |                             |
| Scheduled / Running                  | restore volumes not current here (volumeflow),  | volumes (restores), then    |
|                                      | then adopt, start or create each service's      | Running / Succeeded /       |
|                                      | container in dependsOn order; restart unhealthy | Failed, services, Degraded  |
|                                      | ones; back the volumes up in the background     |                             |
| bound here with `status.move`        | stop the services, final backups                | finish_move (→ Pending)     |
| Succeeded                            | nothing (every service completed)               | service statuses            |
| Failed                               | stop what still runs (containers and logs stay) | service statuses            |
| Terminating                          | remove containers, network, ephemeral volumes   | Terminated, ResourcesRemoved|
|   (annotated delete-volumes)         | and its Persistent volumes here too             |                             |
| Terminated                           | make sure everything is gone                    | none                        |

Guarantees:

* **Level-based and idempotent**: the key carries no event; reconcile reads the current state, so running it
  again (or after a restart) changes nothing that is already right, and writes nothing unchanged.
* **Compare-and-swap writes, stale reads re-read**: a Conflict, or a FailedPrecondition such as a late Running
  refused because the project is now Terminating, makes reconcile read the project from the API server and
  decide again (at most `STALE_ATTEMPTS` times, then the key is retried with backoff).
* **Phase changes only through `caravanserai.project.lifecycle`** (run, succeed, fail, terminate).
* **Hand-off**: a project moved away from this node (`status.previousNodeRef`, drained or tainted) keeps its
  containers here, served by the ingress, until it runs on its new node with every service ready (the hand-off
  is then cleared) or `status.handoffDeadline` passes; it is looked at every
  `HANDOFF_POLL` seconds meanwhile. A project with backed-up volumes moves through `status.move` instead: its
  services are stopped, final backups taken and the snapshots handed over (`volumeflow`).
* **Data before services**: with volumes (`volumeflow`), no service of a project starts before every backed-up
  volume has its current copy here; a failed restore (RestoreFailed) raises, so the project waits, retried with
  backoff. Stale copies of a project that runs elsewhere are removed when it is released.
* **Health**: an unhealthy container is restarted by the agent (Docker does not), counted in the service's
  restart count and recorded as a Warning Event (Unhealthy); a service that starts crash-looping gets a Warning
  Event (CrashLoop); both make the project Degraded.
* **Self-fenced, hands off**: while the agent is fenced (`selffence`), reconcile does nothing; every project is
  queued again when the fence is lifted.
* **What Docker could not make is said at once**: a network, volume or container Docker refused to make (a
  `SetupFailure`: its address pools exhausted, a name taken, a daemon-side error), a start-first replacement that
  did not become healthy (a `SetupFailure` too: the old container keeps serving) and data a service waits for
  (a Secret or Config missing) are written into the project's status before anything is retried: each waiting
  service's message and `waitingFor`, and while the project is Scheduled its `Phase` condition (`waiting for
  network: <Docker's message> (services web, db)`); a `SetupFailure` is also a Warning Event (NetworkFailed,
  VolumeFailed, CreateFailed, StartFirstFailed) and is tried again after `SETUP_RETRY` (1 s doubling up to 30 s);
  the first attempt that gets past it clears the message.
* **Exit codes survive Docker's restarts**: Docker's `die` events (`saw_exit`) record a container's exit code,
  which its inspect no longer shows once Docker has restarted it; the service's `lastExitCode` reports it.
* **Retries**: Docker unreachable or an API error raises, so the controller retries with backoff; a project that
  is not yet settled (containers starting or restarting) is looked at again after `resync` seconds even if no
  Docker event arrives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import structlog

from caravanserai import meta, v1
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.containers import NO_INPUTS
from caravanserai.agent.docker.records import ContainerEvent, Observed
from caravanserai.agent.volumeflow import VolumeFlow
from caravanserai.agent.workload import health, projectstatus
from caravanserai.agent.workload.health import HealthProber
from caravanserai.agent.workload.ledger import RestartLedger
from caravanserai.agent.workload.project import HealthView, Outcome, ProjectRuntime
from caravanserai.agent.workload.pullreport import PullEvents
from caravanserai.agent.workload.servicedata import ServiceData
from caravanserai.backoff import Backoff, BackoffState
from caravanserai.client import Client
from caravanserai.clock import Clock, seconds
from caravanserai.controller import NORMAL, WARNING, EventRecorder, Result
from caravanserai.errors import Conflict, FailedPrecondition, Forbidden, NotFound
from caravanserai.project import lifecycle

log = structlog.get_logger(__name__)

REASON_RESOURCES_REMOVED = "ResourcesRemoved"
STALE_ATTEMPTS = 3
CRASHLOOP_RECHECK = 5.0  # seconds: a crash-looping project is looked at again (it leaves the state after a stable run)
MOVABLE = (v1.SCHEDULED, v1.RUNNING, *lifecycle.FINISHED)  # phases in which a move hands the data over
HANDOFF_POLL = 2.0  # seconds between looks at a project moved away whose old containers still run here
SETUP_RETRY = Backoff(initial=1.0, cap=30.0, jitter=0.2, reset_after=None)  # after Docker refused to make something


def _holdup(outcome: Outcome) -> tuple[str, str] | None:
    """What holds the project's services up beyond start-up order, as (reason, message) for its status."""
    blocked = outcome.blocked
    if blocked is not None:  # services already made are not held up: the project still is
        return projectstatus.holdup(outcome.stuck, reason=blocked.reason) or (blocked.reason, str(blocked))
    return projectstatus.holdup(outcome.stuck)


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
        prober: HealthProber | None = None,
        fenced: Callable[[], bool] = lambda: False,
        data: ServiceData | None = None,
        volumes: VolumeFlow | None = None,
    ) -> None:
        self._volumes = volumes  # restores, backups and moves of Persistent volumes (None: today's behaviour)
        self._fenced = fenced  # while true (self-fenced, see selffence), Docker and statuses are left alone
        self._client = client
        self._data = data
        self._recorder = recorder
        self._projects = projects
        self._lookup = lookup
        self._node = node
        self._clock = clock
        self._resync = resync
        self._prober = prober
        self._ledger = RestartLedger()
        self._setup_retries: dict[str, BackoffState] = {}  # project → its retries since Docker refused a setup step

    def saw_exit(self, event: ContainerEvent) -> None:
        """Docker's `die` event of a container of a project here: remember its exit code (see the docstring)."""
        if event.project and event.service and event.container_id and event.exit_code is not None:
            self._ledger.exited(event.project, event.service, event.container_id, event.exit_code)

    async def reconcile(self, key: str) -> Result:
        """Reconcile the project named `key` (see the module docstring)."""
        return Result(requeue_after=await self.sync(key))

    async def sync(self, name: str) -> float | None:
        """Reconcile the project `name` (its key; a bare name is a `default` project's); returns seconds after
        which to look again (None: only on change)."""
        if self._fenced():  # all is queued again when the fence is lifted
            return None
        name = naming.project_key(name)
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
            return await self._release(name, project)
        phase = project.status.phase
        deleting = project.metadata.HasField("deletion_timestamp")
        if project.status.HasField("move") and self._volumes is not None and phase in MOVABLE and not deleting:
            return await self._volumes.move(project)
        if phase in (v1.TERMINATING, v1.TERMINATED, *lifecycle.FINISHED):
            await self._leave(name)
        if phase == v1.TERMINATING:
            await self._terminate(project)
            return None
        if phase == v1.TERMINATED:
            await self._remove(name)
            return None
        if phase in lifecycle.FINISHED:
            await self._settle(project, stop=phase == v1.FAILED)
            return None
        if phase in (v1.SCHEDULED, v1.RUNNING) and not deleting:
            return await self._run(project)
        return None

    async def _leave(self, name: str) -> None:
        """Stop the project's background backups (it finished, is being deleted, or is no longer here)."""
        if self._volumes is not None:
            await self._volumes.leave(name)

    async def _release(self, name: str, project: v1.Project | None) -> float | None:
        """The project is not (any more) bound here: remove its Docker objects, unless it was moved away with a
        hand-off that still lasts (its old containers run until it runs elsewhere or the deadline passes)."""
        if project is None:
            project = await self._fetch(name)
        if project is not None and project.status.previous_node_ref == self._node:
            left = seconds(project.status.handoff_deadline) - self._clock.now()
            if left > 0 and project.status.phase not in (v1.TERMINATING, v1.TERMINATED):  # ends when ready there
                return min(left, HANDOFF_POLL)
        self._ledger.forget(name)
        self._setup_retries.pop(name, None)
        if self._prober is not None:
            self._prober.forget_except(name, ())
        await self._leave(name)
        await self._remove(name)
        return await self._volumes.release(name, project) if self._volumes is not None else None

    async def _remove(self, name: str, *, persistent: bool = False) -> int:
        """Remove the project's Docker objects and the files of its data volumes (with `persistent`, its Persistent
        volumes too); how many Docker objects went."""
        removed = await self._projects.remove(name, persistent=persistent)
        if self._data is not None:
            self._data.files.remove(name)
        return removed

    def _with_health(self, project: v1.Project) -> HealthView:
        """Observed containers with the health of the agent's own http/tcp checks filled in."""
        prober, name = self._prober, naming.key_of(project)

        def view(service: v1.Service, found: Observed) -> Observed:
            check = service.healthcheck
            if prober is None or not (check.HasField("http") or check.HasField("tcp")):
                return found
            if found.status != projectstatus.RUNNING or not found.ip:
                return found
            prober.track(name, service.name, container_id=found.container_id, address=found.ip, check=check)
            return dataclasses.replace(found, health=prober.status(found.container_id) or health.STARTING)

        return view

    async def _prepare_volumes(self, project: v1.Project) -> v1.Project:
        """Restore what is not current here before anything starts; the project as last written."""
        if self._volumes is None:
            return project
        try:
            return await self._volumes.prepare(project)
        except (NotFound, Forbidden, FailedPrecondition) as exc:  # deleted, moved or finished meanwhile
            raise StaleProject(str(exc)) from exc

    async def _run(self, project: v1.Project) -> float | None:
        """Bring the project's containers to their spec (in dependsOn order), restart unhealthy ones, report."""
        project = await self._prepare_volumes(project)
        name, spec = naming.key_of(project), project.spec
        inputs = await self._data.inputs(project) if self._data is not None else NO_INPUTS
        pulls = PullEvents(project, client=self._client, recorder=self._recorder, clock=self._clock)
        outcome = await self._projects.ensure(
            project, with_health=self._with_health(project), inputs=inputs, pulls=pulls
        )
        project = pulls.latest  # with the progress messages written while images were pulled
        if self._data is not None and not outcome.waiting and outcome.failure is None:  # nothing old runs on
            self._data.files.prune(name, {path for i in inputs.services.values() for path, _ in i.mounts})
        if self._prober is not None:
            self._prober.forget_except(name, {o.container_id for o in outcome.observed.values()})
        restarted = await self._restart_unhealthy(project, outcome.observed)
        now = self._clock.now()
        if outcome.failure is not None:
            failure = outcome.failure
            verdict = projectstatus.failure(spec, outcome.observed, reason=failure.reason, message=failure.message)
        else:
            context = self._ledger.context(project, outcome.observed, outcome.waiting, now=now)
            verdict = projectstatus.assess(spec, outcome.observed, context)
            verdict = dataclasses.replace(verdict, holdup=_holdup(outcome))
        generation = project.metadata.generation
        updated = projectstatus.apply(project, verdict, generation=generation, now=now)
        await self._write(project, updated)
        if verdict.phase is not None and verdict.phase != project.status.phase:
            await self._report(project, verdict.phase, verdict.reason, verdict.message)
        await self._report_services(project, updated, restarted)
        if self._volumes is not None:
            self._volumes.follow(project)
        return await self._retry_setup(project, outcome) or self._next_look(verdict)

    async def _retry_setup(self, project: v1.Project, outcome: Outcome) -> float | None:
        """After a setup step failed (Docker refused to make something the project needs, a start-first replacement
        did not become healthy): a Warning Event saying what, and the delay before the next attempt (SETUP_RETRY);
        None (and the retries forgotten) when nothing failed."""
        name, blocked = naming.key_of(project), outcome.blocked
        if blocked is None:
            self._setup_retries.pop(name, None)
            return None
        log.warning("a setup step failed; retrying", project=name, reason=blocked.reason, error=str(blocked))
        if self._recorder is not None:
            await self._recorder.event(project, WARNING, blocked.reason, str(blocked))
        retries = self._setup_retries.setdefault(name, SETUP_RETRY.start(self._clock))
        return retries.next_delay()

    def _next_look(self, verdict: projectstatus.Assessment) -> float | None:
        """None for a settled project (every service ready, nothing degraded, or finished); soon for a crash loop
        (leaving it is a matter of time, not of an event); else after `resync` (Docker events, health changes and
        the prober wake it before that)."""
        if (verdict.ready and verdict.degraded is None) or verdict.phase in lifecycle.FINISHED:
            return None
        if any(s.state == projectstatus.CRASHLOOP for s in verdict.services):
            return min(self._resync, CRASHLOOP_RECHECK)
        return self._resync

    async def _restart_unhealthy(self, project: v1.Project, observed: dict[str, Observed]) -> list[str]:
        """Restart the running containers that failed their health check (Docker does not); the services."""
        restarted = []
        for service in project.spec.services:
            found = observed.get(service.name)
            if found is None or found.status != projectstatus.RUNNING:
                continue
            self._ledger.saw_health(naming.key_of(project), service.name, found.health)
            if found.health != projectstatus.UNHEALTHY:
                continue
            log.warning("restarting unhealthy container", project=naming.key_of(project), service=service.name)
            await self._projects.restart_service(found)
            self._ledger.restarted(naming.key_of(project), service.name, found.container_id)
            if self._prober is not None:
                self._prober.forget_except(
                    naming.key_of(project),
                    {o.container_id for o in observed.values() if o.container_id != found.container_id},
                )
            restarted.append(service.name)
            observed[service.name] = dataclasses.replace(found, health=health.STARTING)
        return restarted

    async def _report_services(self, before: v1.Project, after: v1.Project, restarted: list[str]) -> None:
        """Warning Events for services restarted for their health and services that started crash-looping."""
        if self._recorder is None:
            return
        old = {s.name: s for s in before.status.services}
        for status in after.status.services:
            if status.name in restarted:
                message = f"service {status.name} failed its health check; restarted ({status.restart_count} restarts)"
                await self._recorder.event(before, WARNING, projectstatus.REASON_UNHEALTHY, message)
            was = old.get(status.name)
            if status.state == projectstatus.CRASHLOOP and (was is None or was.state != projectstatus.CRASHLOOP):
                message = f"service {status.name} is crash-looping: {status.message}"
                await self._recorder.event(before, WARNING, projectstatus.REASON_CRASHLOOP, message)

    async def _settle(self, project: v1.Project, *, stop: bool) -> None:
        """A Failed or Succeeded project runs nothing: stop what still runs (Failed) and report the final
        service states."""
        if stop:
            await self._projects.stop(naming.key_of(project))
        observed = await self._projects.observe(project)
        context = projectstatus.Context(previous={s.name: s for s in project.status.services}, now=self._clock.now())
        verdict = dataclasses.replace(projectstatus.assess(project.spec, observed, context), phase=None)
        now = self._clock.now()
        await self._write(project, projectstatus.apply(project, verdict, generation=None, now=now))

    async def _terminate(self, project: v1.Project) -> None:
        """Remove every Docker object of the project except persistent volumes (those too when its deletion asks:
        `lifecycle.deletes_volumes`), then report Terminated."""
        persistent = lifecycle.deletes_volumes(project)
        removed = await self._remove(naming.key_of(project), persistent=persistent)
        self._ledger.forget(naming.key_of(project))
        kinds = (
            "containers, network, ephemeral and Persistent volumes"
            if persistent
            else "containers, network and ephemeral volumes"
        )
        message = f"removed {removed} Docker object(s): {kinds}"
        now = self._clock.now()
        terminated = lifecycle.terminate(project, reason=REASON_RESOURCES_REMOVED, message=message, now=now)
        del terminated.status.services[:]
        meta.set_condition(
            terminated.status.conditions,
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
        name = naming.key_of(project)
        log.info("project phase changed", project=name, phase=phase, reason=reason, message=message)
        if self._recorder is not None:
            await self._recorder.event(project, WARNING if phase == v1.FAILED else NORMAL, reason, message)

    async def _write(self, project: v1.Project, updated: v1.Project) -> None:
        """Store `updated`'s status if it differs from `project`'s (CAS on the version read)."""
        if updated.status == project.status:
            return
        try:
            await self._client.projects.update_status(updated)
        except (Conflict, FailedPrecondition, NotFound, Forbidden) as exc:
            name = naming.key_of(project)
            log.debug("project changed while reconciling; reading it again", project=name, error=str(exc))
            raise StaleProject(str(exc)) from exc


__all__ = [
    "ProjectReconciler",
    "REASON_RESOURCES_REMOVED",
    "SETUP_RETRY",
    "STALE_ATTEMPTS",
    "StaleProject",
]
