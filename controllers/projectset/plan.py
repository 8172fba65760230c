"""What a ProjectSet's controller does next: pure functions over a snapshot of the set's replicas.

A `Replica` is what the planner knows of one owned project (its revision, whether it is ready and available,
whether it is being deleted). `plan` returns a `Step`: how many replicas of which revision to create and which to
delete. The rules, as Kubernetes' deployment controller applies them (one home for the arithmetic: the bounds
come from `caravanserai.project.replicas.rolling_bounds`):

* **Scale** (no replica of an older revision, or the set is paused, or its rollout failed — see `hold`): create
  replicas up to spec.replicas, delete the worst ones above it. A paused set creates replicas of its current
  revision, so pausing keeps the old template where a rollout stopped. A failed rollout stops the update: the
  replicas of the failed revision stay as they are (until the template changes), and the replicas that serve
  still follow spec.replicas (new ones of the current revision), as Kubernetes scales a stalled Deployment.
* **RollingUpdate**: new replicas are created while the total (replicas not being deleted, of every revision)
  stays within spec.replicas + maxSurge; old replicas are deleted while the available ones stay at least
  spec.replicas − maxUnavailable. Unavailable old replicas go first (they cost no availability), then available
  ones; the new revision's unavailable replicas count against the budget, so a revision that never becomes
  ready stops the rollout at once.
* **Recreate**: every old replica is deleted; new ones are created only once no old replica is left, not even
  one being deleted.
* Which replicas go first when there are too many (`deletion_order`): unscheduled before scheduled, not Running
  before Running, not ready before ready, not available before available, newer before older (Kubernetes' ranking).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from caravanserai import v1
from caravanserai.project.replicas import RollingBounds


@dataclass(frozen=True, slots=True)
class Replica:
    """One owned project as the planner sees it."""

    name: str  # the project's key ("namespace/name"; a set's replicas share its namespace)
    revision: str  # the template hash it was made from
    created: float
    scheduled: bool = False
    running: bool = False
    ready: bool = False
    available: bool = False
    terminating: bool = False


@dataclass(frozen=True, slots=True)
class Step:
    """Create `create` replicas of `revision`; delete the named replicas."""

    revision: str = ""
    create: int = 0
    delete: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.create and not self.delete


def deletion_order(replicas: Sequence[Replica]) -> list[Replica]:
    """`replicas`, the first to delete first (module docstring)."""
    return sorted(replicas, key=lambda r: (r.scheduled, r.running, r.ready, r.available, -r.created, r.name))


def _active(replicas: Sequence[Replica]) -> list[Replica]:
    return [r for r in replicas if not r.terminating]


def scale(replicas: Sequence[Replica], *, desired: int, revision: str) -> Step:
    """Create replicas of `revision` up to `desired`, or delete the worst ones above it."""
    active = _active(replicas)
    if len(active) < desired:
        return Step(revision, desired - len(active))
    excess = deletion_order(active)[: len(active) - desired]
    return Step(revision, 0, tuple(r.name for r in excess))


def rolling(replicas: Sequence[Replica], *, desired: int, revision: str, bounds: RollingBounds) -> Step:
    """One step of a rolling update to `revision` (module docstring)."""
    active = _active(replicas)
    new = [r for r in active if r.revision == revision]
    old = [r for r in active if r.revision != revision]
    if not old:
        return scale(replicas, desired=desired, revision=revision)
    total = len(active)
    create = max(0, min(desired - len(new), desired + bounds.surge - total))
    min_available = desired - bounds.unavailable
    new_unavailable = len(new) + create - sum(r.available for r in new)
    max_scaled_down = total + create - min_available - new_unavailable
    if max_scaled_down <= 0:
        return Step(revision, create)
    unhealthy = deletion_order([r for r in old if not r.available])[:max_scaled_down]
    available = sum(r.available for r in active)
    healthy_room = min(available - min_available, max_scaled_down - len(unhealthy))
    healthy = deletion_order([r for r in old if r.available])[: max(0, healthy_room)]
    return Step(revision, create, tuple(r.name for r in (*unhealthy, *healthy)))


def recreate(replicas: Sequence[Replica], *, desired: int, revision: str) -> Step:
    """One step of a Recreate update to `revision` (module docstring)."""
    old = [r for r in replicas if r.revision != revision]
    if old:
        return Step(revision, 0, tuple(r.name for r in old if not r.terminating))
    return scale(replicas, desired=desired, revision=revision)


def held(replicas: Sequence[Replica], *, desired: int, revision: str, current: str) -> Step:
    """A failed rollout to `revision` (module docstring): its replicas are left alone and the others scaled to
    `desired` (new ones of `current`, else of the others' newest revision); with no other replica left, the failed
    revision is the set and is scaled itself."""
    others = [r for r in replicas if r.revision != revision]
    if not _active(others):
        return scale(replicas, desired=desired, revision=revision)
    serving = current or max(others, key=lambda r: r.created).revision
    return scale(others, desired=desired, revision=serving)


def plan(
    replicas: Sequence[Replica],
    *,
    desired: int,
    revision: str,
    strategy: str,
    bounds: RollingBounds,
    paused: bool = False,
    current: str = "",
    hold: bool = False,
) -> Step:
    """The next step towards `desired` replicas of `revision` (module docstring). `paused`: only scale, with new
    replicas of the `current` revision; `hold`: the rollout to `revision` failed (`held`)."""
    if hold:
        return held(replicas, desired=desired, revision=revision, current=current)
    if paused:
        return scale(replicas, desired=desired, revision=current or revision)
    if strategy == v1.RECREATE:
        return recreate(replicas, desired=desired, revision=revision)
    return rolling(replicas, desired=desired, revision=revision, bounds=bounds)


__all__ = ["Replica", "Step", "deletion_order", "held", "plan", "recreate", "rolling", "scale"]
