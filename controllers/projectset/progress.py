"""A ProjectSet's status from a snapshot of its replicas: counts, revisions, and the Progressing and Available
conditions (as a Deployment's). Pure functions; the clock is the caller's `now`.

* **Counts**: `replicas` are the replicas not being deleted; `updatedReplicas` those of the update revision
  (replicas being deleted count nowhere, as pods terminating count nowhere in a Deployment's status);
  `readyReplicas` and `availableReplicas` as `caravanserai.project.replicas` defines them.
* **Progress** (condition Progressing): True with reason NewRevisionAvailable once the rollout is complete
  (spec.replicas replicas, all of the update revision, all available); True with reason ReplicasUpdating while it
  goes on, its message the rollout's counts, so that the condition's `lastHeartbeatTime` is the last time the
  rollout made progress (a count changed); False with reason ProgressDeadlineExceeded when that time is more than
  spec.progressDeadlineSeconds ago. A failed rollout stays failed until the template changes (`failed`: the
  controller then stops replacing replicas). Paused: Unknown with reason ProjectSetPaused (no deadline). Once a
  revision is complete its rollout is over (`rolled_out`): replicas that become unavailable later (a drain, a node
  lost, a scale-up waiting for room) leave the condition as it is and run no deadline, as a Deployment's
  NewReplicaSetAvailable does; the Available condition says how many serve.
* **Available**: True when at least spec.replicas − maxUnavailable replicas are available (RollingUpdate), or all
  of them (Recreate).
* **Revisions** (`history`): the update revision is recorded with the next number (an undo to an older template
  gives that template a new number, as Kubernetes does); revisions no replica runs are kept up to
  spec.revisionHistoryLimit, newest first.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from caravanserai import meta, v1
from caravanserai.clock import seconds, timestamp
from caravanserai.controllers.projectset.plan import Replica
from caravanserai.project.replicas import replicas_of, revision_number, rolling_bounds

REASON_UPDATING = "ReplicasUpdating"
REASON_AVAILABLE = "NewRevisionAvailable"
REASON_PAUSED = "ProjectSetPaused"
REASON_MINIMUM = "MinimumReplicasAvailable"
REASON_BELOW_MINIMUM = "MinimumReplicasUnavailable"


@dataclass(frozen=True, slots=True)
class Counts:
    replicas: int
    ready: int
    updated: int
    available: int
    old: int

    def complete(self, desired: int) -> bool:
        return self.replicas == self.updated == self.available == desired and not self.old


def count(replicas: Sequence[Replica], revision: str) -> Counts:
    active = [r for r in replicas if not r.terminating]
    return Counts(
        replicas=len(active),
        ready=sum(r.ready for r in active),
        updated=sum(r.revision == revision for r in active),
        available=sum(r.available for r in active),
        old=sum(r.revision != revision for r in active),
    )


def failed(status: v1.ProjectSetStatus, revision: str) -> bool:
    """Whether the rollout to `revision` was marked failed (the deadline passed without progress)."""
    condition = meta.get_condition(status.conditions, v1.CONDITION_PROGRESSING)
    return (
        condition is not None
        and condition.reason == v1.REASON_PROGRESS_DEADLINE_EXCEEDED
        and status.update_revision == revision
    )


def rolled_out(status: v1.ProjectSetStatus, revision: str) -> bool:
    """Whether the rollout to `revision` completed (condition Progressing with reason NewRevisionAvailable, for
    this revision): what happens to its replicas afterwards is no rollout."""
    condition = meta.get_condition(status.conditions, v1.CONDITION_PROGRESSING)
    return condition is not None and condition.reason == REASON_AVAILABLE and status.update_revision == revision


def history(
    status: v1.ProjectSetStatus,
    template: v1.ProjectTemplate,
    *,
    revision: str,
    in_use: Collection[str],
    limit: int,
    now: float,
) -> list[v1.ProjectSetRevision]:
    """The revisions to keep, oldest first (module docstring)."""
    kept = [meta.copy(r) for r in status.revisions]
    top = max((r.revision for r in kept), default=0)
    entry = next((r for r in kept if r.hash == revision), None)
    if entry is None:
        entry = v1.ProjectSetRevision(revision=top + 1, hash=revision, created=timestamp(now))
        entry.template.CopyFrom(template)
        kept.append(entry)
    elif entry.revision != top:
        entry.revision = top + 1
        entry.created.CopyFrom(timestamp(now))
    kept.sort(key=lambda r: r.revision)
    unused = [r for r in kept if r.hash != revision and r.hash not in in_use]
    dropped = {r.hash for r in unused[: max(0, len(unused) - limit)]}
    return [r for r in kept if r.hash not in dropped]


def _progress(
    projectset: v1.ProjectSet, status: v1.ProjectSetStatus, counts: Counts, *, number: int, now: float
) -> float | None:
    """Set the Progressing condition of `status`; seconds until the deadline is due, if one runs."""
    spec, conditions = projectset.spec, status.conditions
    desired = replicas_of(spec)
    if failed(projectset.status, status.update_revision):
        return None
    if spec.paused:
        meta.set_condition(
            conditions,
            v1.CONDITION_PROGRESSING,
            v1.UNKNOWN,
            reason=REASON_PAUSED,
            message="the rollout is paused",
            now=now,
        )
        return None
    if counts.complete(desired):
        message = f"revision {number} ({status.update_revision}) is available"
        meta.set_condition(
            conditions, v1.CONDITION_PROGRESSING, v1.TRUE, reason=REASON_AVAILABLE, message=message, now=now
        )
        return None
    if rolled_out(projectset.status, status.update_revision):
        return None  # a shortfall after the rollout (a drain, a lost node, a scale-up) is no rollout: no deadline
    message = (
        f"revision {number}: {counts.updated} of {desired} updated, {counts.available} available, "
        f"{counts.old} of older revisions"
    )
    meta.set_condition(conditions, v1.CONDITION_PROGRESSING, v1.TRUE, reason=REASON_UPDATING, message=message, now=now)
    condition = meta.get_condition(conditions, v1.CONDITION_PROGRESSING)
    assert condition is not None  # set just above
    deadline = seconds(condition.last_heartbeat_time) + spec.progress_deadline_seconds
    if now < deadline:
        return deadline - now
    why = f"revision {number} made no progress for {spec.progress_deadline_seconds}s ({message})"
    meta.set_condition(
        conditions,
        v1.CONDITION_PROGRESSING,
        v1.FALSE,
        reason=v1.REASON_PROGRESS_DEADLINE_EXCEEDED,
        message=why,
        now=now,
    )
    return None


def _available(spec: v1.ProjectSetSpec, status: v1.ProjectSetStatus, counts: Counts, now: float) -> None:
    desired = replicas_of(spec)
    minimum = desired if spec.strategy.type == v1.RECREATE else desired - rolling_bounds(spec).unavailable
    if counts.available >= minimum:
        meta.set_condition(
            status.conditions,
            v1.CONDITION_AVAILABLE,
            v1.TRUE,
            reason=REASON_MINIMUM,
            message=f"{counts.available} of {desired} replicas available (at least {minimum})",
            now=now,
        )
    else:
        meta.set_condition(
            status.conditions,
            v1.CONDITION_AVAILABLE,
            v1.FALSE,
            reason=REASON_BELOW_MINIMUM,
            message=f"{counts.available} of {desired} replicas available, fewer than {minimum}",
            now=now,
        )


def next_status(
    projectset: v1.ProjectSet,
    replicas: Sequence[Replica],
    *,
    revision: str,
    disruptions_allowed: int | None,
    now: float,
) -> tuple[v1.ProjectSetStatus, float | None]:
    """The set's status for this snapshot, and seconds until the progress deadline is due (None: none runs)."""
    spec = projectset.spec
    counts = count(replicas, revision)
    status = meta.copy(projectset.status)
    status.replicas, status.ready_replicas = counts.replicas, counts.ready
    status.updated_replicas, status.available_replicas = counts.updated, counts.available
    status.unavailable_replicas = max(0, replicas_of(spec) - counts.available)
    status.observed_generation = projectset.metadata.generation
    status.disruptions_allowed = -1 if disruptions_allowed is None else disruptions_allowed
    in_use = {r.revision for r in replicas}
    kept = history(status, spec.template, revision=revision, in_use=in_use, limit=spec.revision_history_limit, now=now)
    del status.revisions[:]
    status.revisions.extend(kept)
    status.update_revision = revision
    complete = counts.complete(replicas_of(spec))
    status.current_revision = revision if complete or not status.current_revision else status.current_revision
    due = _progress(projectset, status, counts, number=revision_number(kept, revision), now=now)
    _available(spec, status, counts, now)
    return status, due


__all__ = ["Counts", "count", "failed", "history", "next_status", "rolled_out"]
