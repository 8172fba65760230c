"""Node health decisions as pure functions: is a node Ready, what happens to each project on it, and when.

* **Readiness** is the age of the node's Lease on the injected clock: Ready while `now < last heartbeat +
  heartbeat_timeout`, NotReady from that deadline on (never before). The last heartbeat is the Lease's renew
  time; a node without a Lease counts from its creation, so a freshly registered node gets one timeout to
  send its first heartbeat.
* **The outage clock** starts when the node was marked NotReady: the transition time of its Ready=False
  condition (written by this controller at detection), so every project on the node shares it and a controller
  restart does not reset it.
* **Per project**, on a NotReady node (`plan_project`):
  Scheduled → back to Pending at once; Running → a `NotReadyAt` condition stamped with the outage start, then
  back to Pending once its grace has passed since that stamp (`grace_of`: `grace_period`, unless the project
  tolerates the built-in `node.caravanserai.io/not-ready` or `…/unreachable` NoExecute taint — then its
  `tolerationSeconds`, or forever without them; Kubernetes' way, see `caravanserai.project.tolerations`);
  Terminating → forced to Terminated once
  `terminating_timeout` has passed since the later of the outage start and the deletion request;
  Pending, Failed and Terminated → nothing (a Failed project is never rescheduled automatically).
  A `NotReadyAt` stamped before the current outage began is stale (an earlier outage whose recovery was missed)
  and is stamped again instead of evicting at once.
* On a Ready node, a project still carrying `NotReadyAt` gets it removed (the node came back in time).
* **Brakes** (`evictions_allowed`): no eviction during `startup_grace_period` after the controller starts
  leading, nor while more than `unhealthy_threshold` (55 %) of the nodes are NotReady at once: that many silent
  nodes point at the control plane or the network, not at the nodes.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from caravanserai import meta, v1
from caravanserai.clock import seconds
from caravanserai.project.tolerations import not_ready_grace

DEFAULT_HEARTBEAT_TIMEOUT = 90.0
DEFAULT_GRACE_PERIOD = 180.0
DEFAULT_TERMINATING_TIMEOUT = 600.0
DEFAULT_STARTUP_GRACE_PERIOD = 60.0
DEFAULT_UNHEALTHY_THRESHOLD = 0.55


@dataclass(frozen=True, slots=True)
class HealthConfig:
    """The durations (seconds) and threshold node health works with (defaults as `cara-node-health`'s flags)."""

    heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT
    grace_period: float = DEFAULT_GRACE_PERIOD
    terminating_timeout: float = DEFAULT_TERMINATING_TIMEOUT
    startup_grace_period: float = DEFAULT_STARTUP_GRACE_PERIOD
    unhealthy_threshold: float = DEFAULT_UNHEALTHY_THRESHOLD


class HealthAction(enum.Enum):
    """What to do to one project."""

    NONE = "none"
    STAMP_NOT_READY_AT = "stamp"  # write NotReadyAt (not an eviction)
    TO_PENDING = "to-pending"  # eviction: back to Pending, node_ref cleared
    FORCE_TERMINATED = "force-terminated"  # eviction: Terminating → Terminated
    CLEAR_NOT_READY_AT = "clear"  # the node recovered first


EVICTIONS = frozenset({HealthAction.TO_PENDING, HealthAction.FORCE_TERMINATED})


@dataclass(frozen=True, slots=True)
class HealthStep:
    """`action` for a project, due at `due` (wall-clock seconds); an action due later waits until then."""

    action: HealthAction
    due: float = 0.0


def last_heartbeat(node: v1.Node, lease: v1.Lease | None) -> float:
    """The Lease's renew time, or the node's creation time when it has no renewed Lease."""
    if lease is not None and lease.spec.HasField("renew_time"):
        return seconds(lease.spec.renew_time)
    return seconds(node.metadata.creation_timestamp)


def heartbeat_deadline(node: v1.Node, lease: v1.Lease | None, config: HealthConfig) -> float:
    """The moment the node becomes NotReady unless its Lease is renewed first."""
    return last_heartbeat(node, lease) + config.heartbeat_timeout


def is_ready(deadline: float, now: float) -> bool:
    return now < deadline


def outage_start(node: v1.Node, now: float) -> float:
    """When the current outage began: the transition time of Ready=False, or `now` when not yet recorded."""
    cond = meta.get_condition(node.status.conditions, v1.CONDITION_READY)
    not_ready = node.status.state == v1.NODE_NOT_READY and cond is not None and cond.status == v1.FALSE
    if not_ready and cond is not None and cond.HasField("last_transition_time"):
        return seconds(cond.last_transition_time)
    return now


def not_ready_at(project: v1.Project) -> float | None:
    """The outage start stamped on the project's NotReadyAt condition, or None."""
    cond = meta.get_condition(project.status.conditions, v1.CONDITION_NOT_READY_AT)
    if cond is None or cond.status != v1.TRUE:
        return None
    return seconds(cond.last_transition_time)


def plan_project(project: v1.Project, *, node_ready: bool, outage: float, config: HealthConfig) -> HealthStep:
    """What to do to `project` on its node (see the module docstring). `outage` is the outage start."""
    phase = project.status.phase
    stamp = not_ready_at(project)
    if node_ready:
        has_condition = meta.get_condition(project.status.conditions, v1.CONDITION_NOT_READY_AT) is not None
        return HealthStep(HealthAction.CLEAR_NOT_READY_AT) if has_condition else HealthStep(HealthAction.NONE)
    if phase == v1.SCHEDULED:
        return HealthStep(HealthAction.TO_PENDING, outage)
    if phase == v1.RUNNING:
        grace = grace_of(project, config)
        if grace is None:
            return HealthStep(HealthAction.NONE)  # tolerates the not-ready taint forever: stays
        if stamp is None or stamp < outage:
            return HealthStep(HealthAction.STAMP_NOT_READY_AT, outage)
        return HealthStep(HealthAction.TO_PENDING, stamp + grace)
    if phase == v1.TERMINATING:
        requested = seconds(project.metadata.deletion_timestamp)
        return HealthStep(HealthAction.FORCE_TERMINATED, max(outage, requested) + config.terminating_timeout)
    return HealthStep(HealthAction.NONE)


def grace_of(project: v1.Project, config: HealthConfig) -> float | None:
    """How long `project`, Running, stays on a NotReady node (None: forever): its toleration of the built-in
    not-ready/unreachable NoExecute taint (`tolerationSeconds`), else `config.grace_period`."""
    return not_ready_grace(project.spec.tolerations, config.grace_period)


def unhealthy_fraction(deadlines: Iterable[float], now: float) -> float:
    """The share of nodes (given by their heartbeat deadlines) that are NotReady at `now`; 0 without nodes."""
    total = unhealthy = 0
    for deadline in deadlines:
        total += 1
        unhealthy += not is_ready(deadline, now)
    return unhealthy / total if total else 0.0


def braked(fraction: float, config: HealthConfig) -> bool:
    """Whether so many nodes are NotReady that evictions must stop (strictly more than the threshold)."""
    return fraction > config.unhealthy_threshold


__all__ = [
    "DEFAULT_GRACE_PERIOD",
    "DEFAULT_HEARTBEAT_TIMEOUT",
    "DEFAULT_STARTUP_GRACE_PERIOD",
    "DEFAULT_TERMINATING_TIMEOUT",
    "DEFAULT_UNHEALTHY_THRESHOLD",
    "EVICTIONS",
    "HealthAction",
    "HealthConfig",
    "HealthStep",
    "braked",
    "grace_of",
    "heartbeat_deadline",
    "is_ready",
    "last_heartbeat",
    "not_ready_at",
    "outage_start",
    "plan_project",
    "unhealthy_fraction",
]
