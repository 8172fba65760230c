"""From observed container states to a project's phase and per-service statuses. Pure functions, no I/O.

The rules (an active project is one in phase Scheduled or Running):

* A container **ends for good** when it exited (or is dead) and its restart policy will not bring it back:
  policy Never, or OnFailure with exit code 0. Docker marks a container it is about to restart as
  `restarting` before it reports the exit, so an `exited` container is one Docker has given up on.
* A service that ended for good with exit code 0 is **completed** (a job that did its work); one that ended with
  another code (or is dead) makes an active project **Failed** (reason ContainerExited, exit codes in the message).
* When every service is completed the project **Succeeded** (reason Completed).
* When every service that is not completed has a `running` container the project is **Running** (reason
  ContainersRunning); otherwise the phase stays as it is (Scheduled while containers start or wait for their
  dependencies; Running while one restarts).
* A service is **ready** when its container runs and, with a healthcheck, is healthy; completed services do not
  hold the project back. The project's `Ready` condition says whether every service that is not completed is.
* A service **crash-loops** when it restarted at least `CRASHLOOP_RESTARTS` times, its last exit was within
  `CRASHLOOP_WINDOW`, and it has not run for `STABLE_RUN` since: state `crashloop`, with the last exit code.
* The project's `Degraded` condition is True (reason CrashLoop, else Unhealthy) while a service crash-loops, is
  unhealthy, or was restarted for failing its health check and has not been healthy since.
* While a project is **Scheduled**, its `Phase` condition says what keeps services from starting when it is more
  than start-up order (`holdup`): data that is missing (`waiting for secret "db" (not found) (service app)`, reason
  Waiting) or what Docker could not make (`waiting for network: <Docker's message> (services web, db)`, reason
  NetworkFailed, VolumeFailed or CreateFailed); once nothing does, it says again what the `Scheduled` condition
  says (`Bound to node n1`).
* A service whose container runs while what should replace it waits (a changed spec held by missing data or
  dependencies, a start-first replacement that did not become healthy) says what it waits for in its status
  (`waitingFor`, and its message: `waiting for a healthy replacement: service web: …`); the old container's
  state and readiness are reported as they are.
* A container that exited but should run (policy Always, or OnFailure after a failure; e.g. stopped by hand) or
  was created and never started **needs a start**: the agent starts it, as Docker's own policy would.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from caravanserai import meta, v1
from caravanserai.agent.docker.containers import RESTART_NEVER, RESTART_ON_FAILURE, restart_policy
from caravanserai.agent.docker.records import Observed
from caravanserai.agent.workload.failures import (
    REASON_CREATE_FAILED,
    REASON_NETWORK_FAILED,
    REASON_START_FIRST_FAILED,
    REASON_VOLUME_FAILED,
)
from caravanserai.project import lifecycle, readiness

# Docker's State.Status values.
CREATED = "created"
RUNNING = "running"
PAUSED = "paused"
RESTARTING = "restarting"
REMOVING = "removing"
EXITED = "exited"
DEAD = "dead"
# States of our own: no container yet; not started because of dependsOn; done; restarting over and over.
PENDING = "pending"
WAITING = "waiting"
COMPLETED = readiness.SERVICE_COMPLETED
CRASHLOOP = "crashloop"
# Health (Docker's words).
HEALTHY = "healthy"
UNHEALTHY = "unhealthy"

CRASHLOOP_RESTARTS = 3
CRASHLOOP_WINDOW = 60.0
STABLE_RUN = 10.0

REASON_RUNNING = "ContainersRunning"
REASON_EXITED = "ContainerExited"
REASON_COMPLETED = "Completed"
REASON_READY = "ContainersReady"
REASON_NOT_READY = "ContainersNotReady"
REASON_CRASHLOOP = "CrashLoop"
REASON_UNHEALTHY = "Unhealthy"
REASON_HEALTHY = "ServicesHealthy"
REASON_WAITING = "Waiting"
HOLDUP_REASONS = frozenset(
    {REASON_WAITING, REASON_NETWORK_FAILED, REASON_VOLUME_FAILED, REASON_CREATE_FAILED, REASON_START_FIRST_FAILED}
)


@dataclass(frozen=True, slots=True)
class Context:
    """What the agent knows besides Docker's view: what each waiting service waits for, restarts made by the agent,
    services restarted for health and not healthy since, the previous statuses, the time, and the exit codes of
    the current containers' last exits as Docker's events told them."""

    waiting: Mapping[str, str] = field(default_factory=dict)
    agent_restarts: Mapping[str, int] = field(default_factory=dict)
    health_restarted: Collection[str] = ()
    previous: Mapping[str, v1.ServiceStatus] = field(default_factory=dict)
    now: float = 0.0
    last_exits: Mapping[str, int] = field(default_factory=dict)  # service → its container's last exit code (events)


@dataclass(frozen=True, slots=True)
class Assessment:
    """The verdict for a project: the phase to move to (None: keep the current one) with its reason and message,
    the per-service statuses, whether every service that should run is ready, and the Degraded verdict."""

    phase: str | None
    reason: str
    message: str
    services: tuple[v1.ServiceStatus, ...]
    ready: bool
    not_ready: tuple[str, ...] = ()
    degraded: tuple[str, str] | None = None  # (reason, message) while degraded
    holdup: tuple[str, str] | None = None  # (reason, message) of what keeps services from starting (`holdup`)


def holdup(stuck: Mapping[str, str], *, reason: str = REASON_WAITING) -> tuple[str, str] | None:
    """(reason, message) saying what the `stuck` services (name → what it waits for) wait for, services waiting
    for the same thing named together, e.g. `waiting for network: … (services db, web)`; None when none is."""
    if not stuck:
        return None
    by_wait: dict[str, list[str]] = {}
    for service, waits in sorted(stuck.items()):
        by_wait.setdefault(waits, []).append(service)
    parts = [
        f"waiting for {waits} (service{'s' if len(names) > 1 else ''} {', '.join(names)})"
        for waits, names in by_wait.items()
    ]
    return reason, "; ".join(parts)


def ended_for_good(service: v1.Service, observed: Observed) -> bool:
    """Whether the container stopped and neither Docker nor the agent will start it again."""
    if observed.status == DEAD:
        return True
    if observed.status != EXITED:
        return False
    policy = restart_policy(service)
    return policy == RESTART_NEVER or (policy == RESTART_ON_FAILURE and observed.exit_code == 0)


def completed(service: v1.Service, observed: Observed | None) -> bool:
    """Whether the service did its work: ended for good with exit code 0."""
    return (
        observed is not None
        and observed.status == EXITED
        and observed.exit_code == 0
        and ended_for_good(service, observed)
    )


def needs_start(service: v1.Service, observed: Observed) -> bool:
    """Whether the agent should start the container: created but never started, or exited although its policy
    wants it running (Docker does not restart a container that was stopped by hand)."""
    if observed.status == CREATED:
        return True
    return observed.status == EXITED and not ended_for_good(service, observed)


def crash_looping(observed: Observed, restarts: int, now: float) -> bool:
    """Restarted at least CRASHLOOP_RESTARTS times, exited within CRASHLOOP_WINDOW, not running stably since
    (never when the time `now` is not known, 0)."""
    if now <= 0 or restarts < CRASHLOOP_RESTARTS or not observed.finished_at:
        return False
    if now - observed.finished_at > CRASHLOOP_WINDOW:
        return False
    stable = observed.status == RUNNING and observed.started_at >= observed.finished_at
    return not (stable and now - observed.started_at >= STABLE_RUN)


def exit_message(service: v1.Service, observed: Observed) -> str:
    """One line on why a container ended, e.g. `service job exited with code 3 (restart policy Never)`."""
    detail = f"exited with code {observed.exit_code}"
    if observed.oom_killed:
        detail += " (out of memory)"
    if observed.error:
        detail += f": {observed.error}"
    return f"service {service.name} {detail} (restart policy {restart_policy(service)})"


def _last_exit_code(observed: Observed, previous: v1.ServiceStatus | None, seen: int | None) -> int:
    """The exit code of the container's last exit: Docker's while it is down; once Docker restarted it (its inspect
    says 0 again) the one its `die` event carried (`seen`), else the one reported before for the same container."""
    if observed.status in (EXITED, DEAD, RESTARTING) and observed.finished_at:
        return observed.exit_code
    if seen is not None:
        return seen
    if previous is not None and previous.container_id == observed.container_id:
        return previous.last_exit_code
    return 0


def service_status(service: v1.Service, observed: Observed | None, context: Context = Context()) -> v1.ServiceStatus:
    """The ServiceStatus for a service given its container (None: not created yet)."""
    name = service.name
    if observed is None:
        waits = context.waiting.get(name, "")
        state, message = (WAITING, f"waiting for {waits}") if waits else (PENDING, "container not created")
        return v1.ServiceStatus(name=name, state=state, image=service.image, message=message, waiting_for=waits)
    restarts = observed.restart_count + context.agent_restarts.get(name, 0)
    previous = context.previous.get(name)
    if previous is not None and previous.container_id == observed.container_id:
        restarts = max(restarts, previous.restart_count)
    last_exit = _last_exit_code(observed, previous, context.last_exits.get(name))
    state, message = observed.status, ""
    if observed.status in (EXITED, DEAD):
        message = f"exited with code {observed.exit_code}" + (" (out of memory)" if observed.oom_killed else "")
    if completed(service, observed):
        state = COMPLETED
    elif crash_looping(observed, restarts, context.now):
        state = CRASHLOOP
        message = f"restarted {restarts} times; last exit code {last_exit}"
    if observed.error:
        message = f"{message}: {observed.error}" if message else observed.error
    waits = context.waiting.get(name, "")
    if waits:
        message = f"{message}; waiting for {waits}" if message else f"waiting for {waits}"
    has_check = service.HasField("healthcheck")
    running = observed.status == RUNNING and state != CRASHLOOP
    return v1.ServiceStatus(
        name=name,
        container_id=observed.container_id,
        state=state,
        restart_count=restarts,
        exit_code=observed.exit_code,
        message=message,
        ready=running and (not has_check or observed.health == HEALTHY),
        image=observed.image or service.image,
        generation=observed.generation,
        health=(observed.health or "starting") if has_check and observed.status == RUNNING else "",
        last_exit_code=last_exit,
        waiting_for=waits,
    )


def degraded(statuses: tuple[v1.ServiceStatus, ...], health_restarted: Collection[str]) -> tuple[str, str] | None:
    """(reason, message) of the Degraded condition, or None when no service is crash-looping or unhealthy."""
    looping = [s for s in statuses if s.state == CRASHLOOP]
    if looping:
        detail = "; ".join(f"service {s.name} is crash-looping ({s.message})" for s in looping)
        return REASON_CRASHLOOP, detail
    sick = [s for s in statuses if s.health == UNHEALTHY or (s.name in health_restarted and s.health != HEALTHY)]
    if sick:
        detail = "; ".join(f"service {s.name} failed its health check ({s.restart_count} restarts)" for s in sick)
        return REASON_UNHEALTHY, detail
    return None


def assess(spec: v1.ProjectSpec, observed: Mapping[str, Observed], context: Context = Context()) -> Assessment:
    """The verdict for an active project whose services have the containers in `observed` (by service name)."""
    statuses = tuple(service_status(s, observed.get(s.name), context) for s in spec.services)
    active = [s for s in statuses if s.state != COMPLETED]
    not_ready = tuple(s.name for s in active if not s.ready)
    sick = degraded(statuses, context.health_restarted)
    failed = [
        exit_message(s, observed[s.name])
        for s in spec.services
        if s.name in observed and ended_for_good(s, observed[s.name]) and not completed(s, observed[s.name])
    ]
    if failed:
        return Assessment(v1.FAILED, REASON_EXITED, "; ".join(failed), statuses, False, not_ready, sick)
    if not active:
        message = f"{len(statuses)} service{'s' if len(statuses) != 1 else ''} completed"
        return Assessment(v1.SUCCEEDED, REASON_COMPLETED, message, statuses, True, (), sick)
    if all(s.state == RUNNING for s in active):
        count, done = len(active), len(statuses) - len(active)
        message = f"{count} container{'s' if count != 1 else ''} running" + (f", {done} completed" if done else "")
        return Assessment(v1.RUNNING, REASON_RUNNING, message, statuses, not not_ready, not_ready, sick)
    return Assessment(None, "", "", statuses, False, not_ready, sick)


def failure(spec: v1.ProjectSpec, observed: Mapping[str, Observed], *, reason: str, message: str) -> Assessment:
    """A verdict of Failed for a reason found while acting (ImagePullFailed, CreateFailed …)."""
    statuses = tuple(service_status(s, observed.get(s.name)) for s in spec.services)
    return Assessment(v1.FAILED, reason, message, statuses, False, tuple(s.name for s in statuses if not s.ready))


_PHASE_CHANGES = {v1.FAILED: lifecycle.fail, v1.SUCCEEDED: lifecycle.succeed}  # Running: `lifecycle.run` with ready


def apply(project: v1.Project, assessment: Assessment, *, generation: int | None, now: float) -> v1.Project:
    """`project` (not changed) with the assessment written into a copy: the phase change through its lifecycle
    constructor (a hand-off ends once the project is Running with every service ready), the service statuses,
    the Ready and Degraded conditions, and observed_generation when given."""
    change = _PHASE_CHANGES.get(assessment.phase or "")
    if assessment.phase == v1.RUNNING and project.status.phase != v1.RUNNING:
        out = lifecycle.run(
            project, reason=assessment.reason, message=assessment.message, now=now, ready=assessment.ready
        )
    elif change is not None and assessment.phase != project.status.phase:
        out = change(project, reason=assessment.reason, message=assessment.message, now=now)
    elif project.status.phase == v1.RUNNING and assessment.ready and project.status.previous_node_ref:
        out = lifecycle.handed_over(project)  # the new copy became ready: the old one may go
    else:
        out = meta.copy(project)
    status = out.status
    del status.services[:]
    status.services.extend(assessment.services)
    if assessment.ready:
        ready, reason, message = v1.TRUE, REASON_READY, "all services ready"
    else:
        waiting = ", ".join(assessment.not_ready)
        ready, reason, message = v1.FALSE, REASON_NOT_READY, f"not ready: {waiting}" if waiting else "not running"
    meta.set_condition(status.conditions, v1.CONDITION_READY, ready, reason=reason, message=message, now=now)
    if assessment.degraded is not None:
        why, detail = assessment.degraded
        meta.set_condition(status.conditions, v1.CONDITION_DEGRADED, v1.TRUE, reason=why, message=detail, now=now)
    else:
        meta.set_condition(
            status.conditions,
            v1.CONDITION_DEGRADED,
            v1.FALSE,
            reason=REASON_HEALTHY,
            message="no service is crash-looping or unhealthy",
            now=now,
        )
    if generation is not None:
        status.observed_generation = generation
    if status.phase == v1.SCHEDULED and assessment.phase in (None, v1.SCHEDULED):
        _explain_holdup(status, assessment.holdup, now=now)
    return out


def _explain_holdup(status: v1.ProjectStatus, holdup: tuple[str, str] | None, *, now: float) -> None:
    """The Phase condition of a Scheduled project: what holds it up, else (once something did) the binding again."""
    if holdup is not None:
        why, detail = holdup
        meta.set_condition(status.conditions, v1.CONDITION_PHASE, v1.TRUE, reason=why, message=detail, now=now)
        return
    phase = meta.get_condition(status.conditions, v1.CONDITION_PHASE)
    if phase is None or phase.reason not in HOLDUP_REASONS:
        return
    bound = meta.get_condition(status.conditions, v1.CONDITION_SCHEDULED)
    reason, message = (bound.reason, bound.message) if bound is not None else (lifecycle.REASON_SCHEDULED, "")
    meta.set_condition(status.conditions, v1.CONDITION_PHASE, v1.TRUE, reason=reason, message=message, now=now)


__all__ = [
    "Assessment",
    "COMPLETED",
    "CRASHLOOP",
    "CRASHLOOP_RESTARTS",
    "CRASHLOOP_WINDOW",
    "CREATED",
    "Context",
    "DEAD",
    "EXITED",
    "HEALTHY",
    "HOLDUP_REASONS",
    "PAUSED",
    "PENDING",
    "REASON_COMPLETED",
    "REASON_CRASHLOOP",
    "REASON_EXITED",
    "REASON_HEALTHY",
    "REASON_NOT_READY",
    "REASON_READY",
    "REASON_RUNNING",
    "REASON_UNHEALTHY",
    "REASON_WAITING",
    "REMOVING",
    "RESTARTING",
    "RUNNING",
    "STABLE_RUN",
    "UNHEALTHY",
    "WAITING",
    "apply",
    "assess",
    "completed",
    "crash_looping",
    "degraded",
    "ended_for_good",
    "exit_message",
    "failure",
    "holdup",
    "needs_start",
    "service_status",
]
