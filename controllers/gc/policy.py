"""What the garbage collector does to a project, and when, as a pure function (`plan`).

In order of precedence:

* **Terminated** → deleted `terminated_delay` seconds (default 5) after it became Terminated (the transition time
  of its Phase condition), so watchers and `caractrl get` see the final state for a moment.
* **Bound to a node that no longer exists** (Scheduled, Running or Terminating with a `node_ref` naming no Node)
  → at once: Terminating ones are finished (Terminated; nothing can run on a node that is gone), Scheduled and
  Running ones go back to Pending to be placed elsewhere. Failed ones are left for their owner to delete.
* **Succeeded**, when `succeeded_ttl` is set (`--succeeded-ttl`) → deleted that long after it succeeded (the
  transition time of its Phase condition) through a normal Delete (Terminating: the agent removes the exited
  containers).
* **Past `spec.expire_at`** → deleted at that moment through a normal Delete: an active project becomes
  Terminating (the agent stops it), an inactive one is removed. A Terminating one is already on its way.
* Anything else → kept; nothing to wait for.

The caller confirms "the node no longer exists" with a live read before acting on it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from caravanserai import meta, v1
from caravanserai.clock import seconds

DEFAULT_TERMINATED_DELAY = 5.0


@dataclass(frozen=True, slots=True)
class GCConfig:
    terminated_delay: float = DEFAULT_TERMINATED_DELAY
    succeeded_ttl: float | None = None  # None: Succeeded projects are kept until deleted


class Verdict(enum.Enum):
    KEEP = "keep"
    DELETE_TERMINATED = "delete-terminated"
    FINISH_ORPHAN = "finish-orphan"  # Terminating on a deleted node → Terminated
    UNBIND_ORPHAN = "unbind-orphan"  # Scheduled/Running on a deleted node → Pending
    EXPIRE = "expire"
    DELETE_SUCCEEDED = "delete-succeeded"


@dataclass(frozen=True, slots=True)
class GCStep:
    """`verdict`, due at `due` (wall-clock seconds)."""

    verdict: Verdict
    due: float = 0.0


def terminated_at(project: v1.Project) -> float:
    """When the project entered its phase (Terminated, Succeeded): its Phase condition's transition time (else its
    deletion request)."""
    cond = meta.get_condition(project.status.conditions, v1.CONDITION_PHASE)
    if cond is not None and cond.HasField("last_transition_time"):
        return seconds(cond.last_transition_time)
    return seconds(project.metadata.deletion_timestamp)


def may_be_orphan(project: v1.Project) -> bool:
    """Whether the project is bound to a node (phases Scheduled, Running, Terminating with a node_ref)."""
    return project.status.phase in v1.BOUND_PHASES and bool(project.status.node_ref)


def plan(project: v1.Project, *, node_exists: bool, config: GCConfig = GCConfig()) -> GCStep:
    """The step for `project` (see the module docstring); `node_exists` says whether its node_ref names a Node."""
    phase = project.status.phase
    if phase == v1.TERMINATED:
        return GCStep(Verdict.DELETE_TERMINATED, terminated_at(project) + config.terminated_delay)
    if phase == v1.SUCCEEDED and config.succeeded_ttl is not None:
        return GCStep(Verdict.DELETE_SUCCEEDED, terminated_at(project) + config.succeeded_ttl)
    if may_be_orphan(project) and not node_exists:
        return GCStep(Verdict.FINISH_ORPHAN if phase == v1.TERMINATING else Verdict.UNBIND_ORPHAN)
    if project.spec.HasField("expire_at") and phase != v1.TERMINATING:
        return GCStep(Verdict.EXPIRE, seconds(project.spec.expire_at))
    return GCStep(Verdict.KEEP)


def is_candidate(project: v1.Project, *, node_known: bool) -> bool:
    """Whether the project may ever need the collector (to filter informer events cheaply)."""
    if project.status.phase in (v1.TERMINATED, v1.SUCCEEDED) or project.spec.HasField("expire_at"):
        return True
    return may_be_orphan(project) and not node_known


__all__ = [
    "DEFAULT_TERMINATED_DELAY",
    "GCConfig",
    "GCStep",
    "Verdict",
    "is_candidate",
    "may_be_orphan",
    "plan",
    "terminated_at",
]
