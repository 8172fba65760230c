"""From observed container states to a project's phase and per-service statuses. Pure functions, no I/O.

The rules (an active project is one in phase Scheduled or Running):

* A container **ends for good** when it exited (or is dead) and its restart policy will not bring it back:
  policy Never, or OnFailure with exit code 0. Docker marks a container it is about to restart as
  `restarting` before it reports the exit, so an `exited` container is one Docker has given up on.
* Any service that ended for good makes an active project **Failed** (reason ContainerExited, the exit codes in
  the message).
* When every service has a `running` container the project is **Running** (reason ContainersRunning).
* Otherwise the phase stays as it is (Scheduled while containers start; Running while one restarts); the
  project's `Ready` condition tells whether every container is up.
* A container that exited but should run (policy Always, or OnFailure after a failure; e.g. stopped by hand) or
  was created and never started **needs a start**: the agent starts it, as Docker's own policy would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from caravanserai import meta, v1
from caravanserai.agent.containers import RESTART_NEVER, RESTART_ON_FAILURE, restart_policy
from caravanserai.agent.dockertypes import Observed

# Docker's State.Status values.
CREATED = "created"
RUNNING = "running"
PAUSED = "paused"
RESTARTING = "restarting"
REMOVING = "removing"
EXITED = "exited"
DEAD = "dead"
# The state reported for a service that has no container yet.
PENDING = "pending"

REASON_RUNNING = "ContainersRunning"
REASON_EXITED = "ContainerExited"
REASON_READY = "ContainersReady"
REASON_NOT_READY = "ContainersNotReady"


@dataclass(frozen=True, slots=True)
class Assessment:
    """The verdict for a project: the phase to move to (None: keep the current one) with its reason and message,
    the per-service statuses, and whether every container runs."""

    phase: str | None
    reason: str
    message: str
    services: tuple[v1.ServiceStatus, ...]
    ready: bool
    not_ready: tuple[str, ...] = ()


def ended_for_good(service: v1.Service, observed: Observed) -> bool:
    """Whether the container stopped and neither Docker nor the agent will start it again."""
    if observed.status == DEAD:
        return True
    if observed.status != EXITED:
        return False
    policy = restart_policy(service)
    return policy == RESTART_NEVER or (policy == RESTART_ON_FAILURE and observed.exit_code == 0)


def needs_start(service: v1.Service, observed: Observed) -> bool:
    """Whether the agent should start the container: created but never started, or exited although its policy
    wants it running (Docker does not restart a container that was stopped by hand)."""
    if observed.status == CREATED:
        return True
    return observed.status == EXITED and not ended_for_good(service, observed)


def exit_message(service: v1.Service, observed: Observed) -> str:
    """One line on why a container ended, e.g. `service job exited with code 3 (restart policy Never)`."""
    detail = f"exited with code {observed.exit_code}"
    if observed.oom_killed:
        detail += " (out of memory)"
    if observed.error:
        detail += f": {observed.error}"
    return f"service {service.name} {detail} (restart policy {restart_policy(service)})"


def service_status(service: v1.Service, observed: Observed | None) -> v1.ServiceStatus:
    """The ServiceStatus for a service given its container (None: not created yet)."""
    if observed is None:
        return v1.ServiceStatus(name=service.name, state=PENDING, image=service.image, message="container not created")
    message = ""
    if observed.status in (EXITED, DEAD):
        message = f"exited with code {observed.exit_code}" + (" (out of memory)" if observed.oom_killed else "")
    if observed.error:
        message = f"{message}: {observed.error}" if message else observed.error
    return v1.ServiceStatus(
        name=service.name,
        container_id=observed.container_id,
        state=observed.status,
        restart_count=observed.restart_count,
        exit_code=observed.exit_code,
        message=message,
        ready=observed.status == RUNNING,
        image=observed.image or service.image,
        generation=observed.generation,
    )


def assess(spec: v1.ProjectSpec, observed: Mapping[str, Observed]) -> Assessment:
    """The verdict for an active project whose services have the containers in `observed` (by service name)."""
    statuses = tuple(service_status(s, observed.get(s.name)) for s in spec.services)
    not_ready = tuple(s.name for s in statuses if not s.ready)
    ended = [
        exit_message(s, observed[s.name])
        for s in spec.services
        if s.name in observed and ended_for_good(s, observed[s.name])
    ]
    if ended:
        return Assessment(v1.FAILED, REASON_EXITED, "; ".join(ended), statuses, False, not_ready)
    if not not_ready:
        count = len(statuses)
        message = f"{count} container{'s' if count != 1 else ''} running"
        return Assessment(v1.RUNNING, REASON_RUNNING, message, statuses, True)
    return Assessment(None, "", "", statuses, False, not_ready)


def failure(spec: v1.ProjectSpec, observed: Mapping[str, Observed], *, reason: str, message: str) -> Assessment:
    """A verdict of Failed for a reason found while acting (ImagePullFailed, CreateFailed …)."""
    statuses = tuple(service_status(s, observed.get(s.name)) for s in spec.services)
    return Assessment(v1.FAILED, reason, message, statuses, False, tuple(s.name for s in statuses if not s.ready))


def apply(project: v1.Project, assessment: Assessment, *, generation: int | None, now: float) -> None:
    """Write an assessment into `project.status` (the project is a copy the caller owns): the phase with its
    Phase condition when it changes, the service statuses, the Ready condition, and observed_generation when
    given."""
    status = project.status
    if assessment.phase is not None and assessment.phase != status.phase:
        meta.set_phase(project, assessment.phase, reason=assessment.reason, message=assessment.message, now=now)
    del status.services[:]
    status.services.extend(assessment.services)
    if assessment.ready:
        ready, reason, message = v1.TRUE, REASON_READY, "all containers running"
    else:
        waiting = ", ".join(assessment.not_ready)
        ready, reason, message = v1.FALSE, REASON_NOT_READY, f"not running: {waiting}" if waiting else "not running"
    meta.set_condition(status.conditions, v1.CONDITION_READY, ready, reason=reason, message=message, now=now)
    if generation is not None:
        status.observed_generation = generation


__all__ = [
    "Assessment",
    "CREATED",
    "DEAD",
    "EXITED",
    "PAUSED",
    "PENDING",
    "REASON_EXITED",
    "REASON_NOT_READY",
    "REASON_READY",
    "REASON_RUNNING",
    "REMOVING",
    "RESTARTING",
    "RUNNING",
    "apply",
    "assess",
    "ended_for_good",
    "exit_message",
    "failure",
    "needs_start",
    "service_status",
]
