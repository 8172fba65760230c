"""What the replicas of a ProjectSet mean: counts and percentages, revisions, readiness and availability.

Shared by the apiserver (validation), the ProjectSet controller, `caractrl` (rollout, drain) and the disruption
budget check (`project.disruption`), so that "available" and "2 or 25%" mean the same thing everywhere.

* **Counts and percentages** (`scaled`): a field such as `maxSurge` is a count ("2") or a percentage of
  `spec.replicas` ("25%"). A percentage is rounded up or down as Kubernetes rounds that field: surge and
  `minAvailable` up, `maxUnavailable` of a rollout down (`rolling_bounds`), so 25% of 10 replicas is 3 surge and 2
  unavailable; when both bounds come to zero, one replica may be unavailable (a rollout must be able to start).
* **Revisions** (`template_hash`): a template's hash is a function of its serialized bytes (deterministic
  serialization: map order does not count), ten lowercase hex digits, stable across processes and releases of
  the protobuf runtime that keep the wire format. Replicas carry it in the `caravanserai.io/template-hash` label.
  The set's status numbers the revisions it recorded (`revision_number`).
* **Replicas** (`owning_set`): a project belongs to the set named by its controller owner reference of kind
  ProjectSet.
* **Ready and available** (`is_ready`, `availability`): ready is Running, not being deleted nor moved off its
  node (`status.move`), every declared
  service counting as ready (`readiness`), and the Ready condition True; available is ready for
  `minReadySeconds`, measured from the Ready condition's transition time on the clock the caller passes in.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from caravanserai import meta, v1
from caravanserai.clock import seconds
from caravanserai.project.readiness import ready_services

DEFAULT_REPLICAS = 1
DEFAULT_SURGE = DEFAULT_UNAVAILABLE = "25%"
DEFAULT_PROGRESS_DEADLINE = 600
DEFAULT_HISTORY_LIMIT = 10
SET_KIND = "ProjectSet"

_COUNT = re.compile(r"(0|[1-9][0-9]{0,8})(%?)", re.ASCII)


def count_problem(text: str) -> str | None:
    """Why `text` is not a count ("3") or a percentage ("25%", at most 100%), or None."""
    match = _COUNT.fullmatch(text)
    if match is None:
        return f"must be a count (2) or a percentage (25%), not {text!r}"
    if match.group(2) and int(match.group(1)) > 100:
        return f"a percentage may not exceed 100%, not {text!r}"
    return None


def scaled(text: str, total: int, *, round_up: bool) -> int:
    """The count `text` stands for out of `total` (a checked count or percentage; empty is 0)."""
    if not text:
        return 0
    if text.endswith("%"):
        exact = int(text[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(text)


def replicas_of(spec: v1.ProjectSetSpec) -> int:
    """spec.replicas, with its default when unset."""
    return spec.replicas if spec.HasField("replicas") else DEFAULT_REPLICAS


@dataclass(frozen=True, slots=True)
class RollingBounds:
    """How far a rolling update may go above spec.replicas (`surge`) and below it (`unavailable`)."""

    surge: int
    unavailable: int


def rolling_bounds(spec: v1.ProjectSetSpec) -> RollingBounds:
    """The rollout's bounds for `spec` (module docstring: surge rounds up, unavailable down, never both 0)."""
    replicas = replicas_of(spec)
    rolling = spec.strategy.rolling_update
    surge = scaled(rolling.max_surge or DEFAULT_SURGE, replicas, round_up=True)
    unavailable = scaled(rolling.max_unavailable or DEFAULT_UNAVAILABLE, replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return RollingBounds(surge, unavailable)


def template_hash(template: v1.ProjectTemplate) -> str:
    """The revision name of `template` (module docstring)."""
    return hashlib.sha256(template.SerializeToString(deterministic=True)).hexdigest()[:10]


def revision_number(revisions: Sequence[v1.ProjectSetRevision], revision: str) -> int:
    """The number a set's status gives the revision hashed `revision` (0: not recorded)."""
    return next((r.revision for r in revisions if r.hash == revision), 0)


def owning_set(project: v1.Project) -> str | None:
    """The name of the ProjectSet that controls `project`, or None."""
    owner = meta.controller_of(project)
    return owner.name if owner is not None and (owner.kind, owner.api_version) == (SET_KIND, v1.API_VERSION) else None


SET_INDEX = "projectset"
"""A projects cache's index of replicas by the key of the set that controls them (`set_index`)."""


def set_index(project: v1.Project) -> list[str]:
    """The index function of `SET_INDEX`: the owning set's key ("namespace/name": a set controls replicas of its
    own namespace), none for a project no set controls."""
    name = owning_set(project)
    return [meta.join_key(project.metadata.namespace, name)] if name is not None else []


def is_ready(project: v1.Project) -> bool:
    """Running, not being deleted nor moved, every service ready and the Ready condition True."""
    if project.status.phase != v1.RUNNING or project.metadata.HasField("deletion_timestamp"):
        return False
    if project.status.HasField("move"):  # its node is stopping it for a move
        return False
    ready, declared = ready_services(project)
    condition = meta.get_condition(project.status.conditions, v1.CONDITION_READY)
    return ready == declared and condition is not None and condition.status == v1.TRUE


@dataclass(frozen=True, slots=True)
class Availability:
    """Whether a replica is available; if it is ready but not yet for long enough, how long until it is."""

    available: bool
    wait: float | None = None


def availability(project: v1.Project, *, min_ready_seconds: int, now: float) -> Availability:
    """Whether `project` has been ready for `min_ready_seconds` at `now` (module docstring)."""
    if not is_ready(project):
        return Availability(False)
    if min_ready_seconds <= 0:
        return Availability(True)
    condition = meta.get_condition(project.status.conditions, v1.CONDITION_READY)
    since = seconds(condition.last_transition_time) if condition is not None else now
    left = since + min_ready_seconds - now
    return Availability(True) if left <= 0 else Availability(False, left)


__all__ = [
    "DEFAULT_HISTORY_LIMIT",
    "DEFAULT_PROGRESS_DEADLINE",
    "DEFAULT_REPLICAS",
    "DEFAULT_SURGE",
    "DEFAULT_UNAVAILABLE",
    "SET_INDEX",
    "SET_KIND",
    "Availability",
    "RollingBounds",
    "availability",
    "count_problem",
    "is_ready",
    "owning_set",
    "replicas_of",
    "revision_number",
    "rolling_bounds",
    "scaled",
    "set_index",
    "template_hash",
]
