"""The project lifecycle: the phase transition table and one constructor per phase change.

    Queued ──admit (its namespace's quota has room)──▶ Pending
    Pending ──bind──▶ Scheduled ──run──▶ Running ──succeed──▶ Succeeded
       ▲                 │  │              │  │
       │                 │  └──fail──▶ Failed ◀──fail┘
       └─return_to_pending (node lost, drained, tainted, no longer eligible; Failed/Succeeded: spec changed)
    Scheduled, Running, Succeeded, Failed ──mark_terminating (Delete)──▶ Terminating ──terminate──▶ Terminated
    Pending, Scheduled, Running ──reclaim (its cohort's lender needs the quota back)──▶ Queued

Guarantees:

* **One table.** `TRANSITIONS` is the only list of legal phase changes; the apiserver refuses every other change
  through `check` (FailedPrecondition), and `tests/unit/project/test_lifecycle.py` walks every pair.
* **One constructor per change** (`bind`, `unschedulable`, `run`, `fail`, `succeed`, `return_to_pending`,
  `mark_terminating`, `terminate`): each returns a copy of the project in its new phase with the `Phase`
  condition recording the reason and message; the project passed in is never changed (informer caches are
  read-only). Writers (scheduler, node health, gc, the agent, `caractrl`) only call these.
* **Deletion wins.** A project with `metadata.deletionTimestamp` is never bound, started or moved: `check`
  refuses Pending → Scheduled, → Running and → Pending for it.
* **Delete** (`delete_plan`): Pending and Terminated projects are removed at once (nothing runs anywhere); a
  project bound to a node (Scheduled, Running, Succeeded, Failed) becomes Terminating and the agent removes its
  containers before it is Terminated; `force` removes at once whatever the phase.
* **Hand-off.** `return_to_pending(..., handoff_until=t)` records the node the project leaves in
  `status.previousNodeRef` and the deadline in `status.handoffDeadline`: that node's agent keeps the old
  containers, and the ingress routes to them, until the project runs again elsewhere with every service ready
  (`run` with `ready`, else `handed_over` once it is ready, clears both) or the deadline passes. Its length is
  `DEFAULT_HANDOFF` unless the writer is told otherwise (`caractrl drain --timeout`, the dashboard's drain,
  placement's `--handoff-timeout`).
* **Preemption** (`preempt`): a `move` without a hand-off, reason Preempted, and a `Preempted` condition naming
  the higher-priority project the room is made for. The condition turns False (reason Rescheduled) when the
  project is bound again (`bind`): it says whether the project is preempted now, and its last transition time
  when that ended (unlike Kubernetes' DisruptionTarget, the object outlives the disruption here).
* **Reclaim** (`reclaim`): a project of a namespace that borrows from its cohort goes back to Queued to give
  the quota back (the apiserver releases its share in the same write), unbound, with a `Preempted` condition
  (reason QuotaReclaimed) naming the project it makes room for; its node removes its containers (no hand-off).
  With backed-up volumes it is moved first (`status.move`, reason QuotaReclaimed), and `finish_move` lands it in
  Queued instead of Pending (`lands_in`).
* **Moves with data** (`move`): a project whose volumes are backed up (`project.backups`) is not returned to
  Pending by the mover. It stays bound with `status.move` set; its node stops the services, takes a final backup
  of each such volume and calls `finish_move`, which returns it to Pending with each snapshot recorded as the
  volume's `handoffSnapshot` (the next node restores exactly that one). Past `move.deadline` (the node dead or
  the repository unreachable) `finish_move` is called without snapshots and the newest ones are used. A project
  without backed-up volumes is moved at once with the hand-off above.

This module sits below the client layer: the apiserver, the controllers, the agent and the CLI import it.
"""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.clock import timestamp
from caravanserai.errors import FailedPrecondition, FieldViolation, Invalid
from caravanserai.project import backups

# Legal phase changes (old → allowed new). Staying in a phase is legal except for Terminated (final). Terminating
# is entered only through Delete (`mark_terminating`).
TRANSITIONS: dict[str, frozenset[str]] = {
    v1.QUEUED: frozenset({v1.PENDING}),
    v1.PENDING: frozenset({v1.SCHEDULED, v1.QUEUED}),
    v1.SCHEDULED: frozenset({v1.RUNNING, v1.SUCCEEDED, v1.FAILED, v1.PENDING, v1.QUEUED, v1.TERMINATING}),
    v1.RUNNING: frozenset({v1.SUCCEEDED, v1.FAILED, v1.PENDING, v1.QUEUED, v1.TERMINATING}),
    v1.SUCCEEDED: frozenset({v1.PENDING, v1.TERMINATING}),
    v1.FAILED: frozenset({v1.PENDING, v1.TERMINATING}),
    v1.TERMINATING: frozenset({v1.TERMINATED}),
    v1.TERMINATED: frozenset(),
}
# Phases whose project Delete removes at once (nothing of it runs on any node).
DELETE_AT_ONCE = frozenset({v1.QUEUED, v1.PENDING, v1.TERMINATED, ""})
# Phases of a project bound to no node.
UNBOUND = frozenset({v1.QUEUED, v1.PENDING})
# Phases a project never leaves by itself (only a spec change, a restart or Delete moves it on).
FINISHED = frozenset({v1.SUCCEEDED, v1.FAILED})
# Seconds the node a moved project leaves keeps its old containers while the project starts elsewhere.
DEFAULT_HANDOFF = 300.0

REASON_CREATED = "Created"
REASON_QUEUED = "WaitingForQuota"
REASON_ADMITTED = "Admitted"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_DELETION_REQUESTED = "DeletionRequested"
REASON_NODE_DRAINED = "NodeDrained"
REASON_NODE_NO_LONGER_ELIGIBLE = "NodeNoLongerEligible"
REASON_TAINT_EVICTION = "TaintEviction"
REASON_SPEC_CHANGED = "SpecChanged"
REASON_RESTARTED = "Restarted"
REASON_PREEMPTED = "Preempted"
REASON_RESCHEDULED = "Rescheduled"
REASON_QUOTA_RECLAIMED = "QuotaReclaimed"


def is_allowed(before: str, after: str) -> bool:
    """Whether a project may go from phase `before` to phase `after` (staying is allowed, except Terminated)."""
    if before == after:
        return before != v1.TERMINATED
    return after in TRANSITIONS.get(before, frozenset())


def _phase(project: v1.Project, phase: str, *, reason: str, message: str, now: float) -> v1.Project:
    out = meta.copy(project)
    meta.set_phase(out, phase, reason=reason, message=message, now=now)
    return out


def created(project: v1.Project, *, now: float) -> None:
    """Give a new project (being created, owned by the caller) its first phase, Pending."""
    meta.set_phase(
        project, v1.PENDING, reason=REASON_CREATED, message="Project accepted; waiting to be scheduled", now=now
    )


def queue(project: v1.Project, message: str, *, now: float) -> None:
    """Hold a new project (being created, owned by the caller) back in Queued: its namespace's quota has no room;
    `message` says what it waits for."""
    meta.set_phase(project, v1.QUEUED, reason=REASON_QUEUED, message=message, now=now)


def waiting(project: v1.Project, message: str, *, now: float) -> v1.Project:
    """A Queued project with a new account of what it waits for (its place in the queue, the quota's use)."""
    return _phase(project, v1.QUEUED, reason=REASON_QUEUED, message=message, now=now)


def admit(project: v1.Project, *, now: float) -> v1.Project:
    """Queued → Pending: the quota has room; the apiserver counts its use in the same write, or refuses it."""
    return _phase(project, v1.PENDING, reason=REASON_ADMITTED, message="Admitted by its namespace's quota", now=now)


def bind(project: v1.Project, node: str, *, now: float) -> v1.Project:
    """Pending → Scheduled on `node`: node_ref, Scheduled=True and the bound generation recorded."""
    message = f"Bound to node {node}"
    out = _phase(project, v1.SCHEDULED, reason=REASON_SCHEDULED, message=message, now=now)
    out.status.node_ref = node
    out.status.scheduled_generation = project.metadata.generation
    meta.set_condition(
        out.status.conditions, v1.CONDITION_SCHEDULED, v1.TRUE, reason=REASON_SCHEDULED, message=message, now=now
    )
    preempted = meta.get_condition(out.status.conditions, v1.CONDITION_PREEMPTED)
    if preempted is not None and preempted.status == v1.TRUE:
        meta.set_condition(
            out.status.conditions,
            v1.CONDITION_PREEMPTED,
            v1.FALSE,
            reason=REASON_RESCHEDULED,
            message=f"Bound again, to node {node}, after: {preempted.message}",
            now=now,
        )
    return out


def unschedulable(project: v1.Project, message: str, *, now: float) -> v1.Project:
    """Pending stays Pending with Scheduled=False and the Phase condition saying why (reason Unschedulable)."""
    out = _phase(project, v1.PENDING, reason=REASON_UNSCHEDULABLE, message=message, now=now)
    meta.set_condition(
        out.status.conditions, v1.CONDITION_SCHEDULED, v1.FALSE, reason=REASON_UNSCHEDULABLE, message=message, now=now
    )
    return out


def run(project: v1.Project, *, reason: str, message: str, now: float, ready: bool = True) -> v1.Project:
    """→ Running (the agent: every long-running service runs). Ends a hand-off when every service is `ready` (the
    previous node may clean up); until then the old copy keeps serving (`handed_over` ends it later)."""
    out = _phase(project, v1.RUNNING, reason=reason, message=message, now=now)
    return handed_over(out) if ready else out


def handed_over(project: v1.Project) -> v1.Project:
    """A copy of `project` with its hand-off ended (no `previousNodeRef`, no `handoffDeadline`): its new copy is
    ready, and the node it left removes the old containers."""
    out = meta.copy(project)
    out.status.previous_node_ref = ""
    out.status.ClearField("handoff_deadline")
    return out


def fail(project: v1.Project, *, reason: str, message: str, now: float) -> v1.Project:
    """→ Failed (the agent: a service ended for good with an error, or could not be created)."""
    return _phase(project, v1.FAILED, reason=reason, message=message, now=now)


def succeed(project: v1.Project, *, reason: str, message: str, now: float) -> v1.Project:
    """→ Succeeded (the agent: every service completed, i.e. exited 0 and will not be restarted)."""
    out = _phase(project, v1.SUCCEEDED, reason=reason, message=message, now=now)
    out.status.previous_node_ref = ""
    out.status.ClearField("handoff_deadline")
    return out


def return_to_pending(
    project: v1.Project, *, reason: str, message: str, now: float, handoff_until: float | None = None
) -> v1.Project:
    """→ Pending, unbound (node lost, drained, tainted, no longer eligible, or a finished project's spec changed),
    so the scheduler places it again. With `handoff_until`, the node it leaves keeps the old containers until
    the project runs elsewhere or that time passes."""
    out = _phase(project, v1.PENDING, reason=reason, message=message, now=now)
    if handoff_until is not None and project.status.node_ref:
        out.status.previous_node_ref = project.status.node_ref
        out.status.handoff_deadline.CopyFrom(timestamp(handoff_until))
    out.status.node_ref = ""
    out.status.scheduled_generation = 0
    out.status.ClearField("move")  # a move waiting for final backups ends here too (node lost, say)
    out.status.ClearField("placement")  # the estimates were of the binding that ends here
    meta.remove_condition(out.status.conditions, v1.CONDITION_NOT_READY_AT)
    meta.set_condition(out.status.conditions, v1.CONDITION_SCHEDULED, v1.FALSE, reason=reason, message=message, now=now)
    return out


def move(
    project: v1.Project,
    *,
    reason: str,
    message: str,
    now: float,
    handoff_until: float,
    keep_old_copy: bool = True,
) -> v1.Project:
    """Move the project off its node (drain, taint, no longer eligible, preemption, `restart --move`). With
    backed-up volumes it stays bound with `status.move` (its node stops the services, takes the final backups,
    then calls `finish_move`; after `handoff_until` the move goes on without them); else it returns to Pending at
    once, with a hand-off until `handoff_until` when `keep_old_copy` (the node keeps the old containers until the
    project runs elsewhere), without one otherwise (the node removes them at once: the room is needed, or they are
    of an old spec). A move already asked for is kept as it is."""
    if not backups.backed_up(project.spec):
        until = handoff_until if keep_old_copy else None
        return return_to_pending(project, reason=reason, message=message, now=now, handoff_until=until)
    out = meta.copy(project)
    if out.status.HasField("move"):
        return out
    out.status.move.reason = reason
    out.status.move.message = message
    out.status.move.node = project.status.node_ref
    out.status.move.requested_at.CopyFrom(timestamp(now))
    out.status.move.deadline.CopyFrom(timestamp(handoff_until))
    return out


def preempt(project: v1.Project, *, preemptor: str, message: str, now: float, deadline: float) -> v1.Project:
    """Evict the project from its node to make room for `preemptor` (a higher-priority Pending project): a `move`
    without a hand-off (its node stops it; with backed-up volumes only after the final backups, at most until
    `deadline`), with reason Preempted and the condition `Preempted` naming the preemptor. It goes back to Pending
    and is scheduled again like any project."""
    out = move(project, reason=REASON_PREEMPTED, message=message, now=now, handoff_until=deadline, keep_old_copy=False)
    meta.set_condition(
        out.status.conditions,
        v1.CONDITION_PREEMPTED,
        v1.TRUE,
        reason=REASON_PREEMPTED,
        message=f"Preempted by project {preemptor}: {message}",
        now=now,
    )
    return out


def reclaim(project: v1.Project, *, preemptor: str, message: str, now: float, deadline: float) -> v1.Project:
    """Give the quota `project` borrows back to its cohort, for `preemptor` (a waiting project of a higher priority
    of the namespace that lent it): back to Queued, unbound, without a hand-off (module docstring); with backed-up
    volumes a move first (its node takes the final backups, at most until `deadline`, then `finish_move` queues
    it). A Pending project goes back to Queued at once."""
    bound = project.status.phase not in UNBOUND
    if bound and backups.backed_up(project.spec):
        out = move(
            project,
            reason=REASON_QUOTA_RECLAIMED,
            message=message,
            now=now,
            handoff_until=deadline,
            keep_old_copy=False,
        )
    else:
        out = return_to_pending(project, reason=REASON_QUOTA_RECLAIMED, message=message, now=now)
        meta.set_phase(out, v1.QUEUED, reason=REASON_QUOTA_RECLAIMED, message=message, now=now)
    meta.set_condition(
        out.status.conditions,
        v1.CONDITION_PREEMPTED,
        v1.TRUE,
        reason=REASON_QUOTA_RECLAIMED,
        message=f"Quota reclaimed for project {preemptor}: {message}",
        now=now,
    )
    return out


def lands_in(project: v1.Project) -> str:
    """The phase `finish_move` gives a project moving now: Queued for a reclaim, else Pending."""
    return v1.QUEUED if project.status.move.reason == REASON_QUOTA_RECLAIMED else v1.PENDING


def finish_move(project: v1.Project, *, handoff: dict[str, str], now: float, note: str = "") -> v1.Project:
    """End a move asked with `move`: back to Pending (the move's reason), each volume named in `handoff` given
    that snapshot id as its `handoffSnapshot`, the move cleared, the node it left as `previousNodeRef` (without
    a hand-off deadline; the scheduler places it elsewhere when another node fits). `note` is added to the
    message (e.g. why no final backup was taken)."""
    move_ = project.status.move
    message = move_.message + (f"; {note}" if note else "")
    out = return_to_pending(project, reason=move_.reason or REASON_NODE_DRAINED, message=message, now=now)
    if lands_in(project) == v1.QUEUED:
        meta.set_phase(out, v1.QUEUED, reason=move_.reason, message=message, now=now)
    out.status.previous_node_ref = move_.node  # no hand-off deadline: nothing runs there any more
    for name, snapshot in handoff.items():
        backups.ensure_volume_status(out.status, name).handoff_snapshot = snapshot
    return out


def mark_terminating(project: v1.Project, *, now: float) -> v1.Project:
    """→ Terminating with deletionTimestamp (Delete of a project bound to a node)."""
    out = _phase(
        project,
        v1.TERMINATING,
        reason=REASON_DELETION_REQUESTED,
        message="Deletion requested; waiting for the agent to remove the containers",
        now=now,
    )
    if not out.metadata.HasField("deletion_timestamp"):
        out.metadata.deletion_timestamp.CopyFrom(timestamp(now))
    return out


def terminate(project: v1.Project, *, reason: str, message: str, now: float) -> v1.Project:
    """Terminating → Terminated (the agent removed everything, or the node is gone or dead)."""
    out = _phase(project, v1.TERMINATED, reason=reason, message=message, now=now)
    meta.remove_condition(out.status.conditions, v1.CONDITION_NOT_READY_AT)
    return out


DELETE_VOLUMES = "caravanserai.io/delete-volumes"
"""Annotation `"true"` set by `caractrl delete project NAME --volumes` before the Delete: the agent that terminates
the project removes its Persistent volumes on that node too (by default they stay, with their data)."""


def deletes_volumes(project: v1.Project) -> bool:
    """Whether the deletion of `project` removes its Persistent volumes as well (`DELETE_VOLUMES`)."""
    return project.metadata.annotations.get(DELETE_VOLUMES) == "true"


def delete_plan(project: v1.Project, *, force: bool) -> str:
    """What Delete does to a project: "remove" (the record goes now), "mark" (becomes Terminating) or "noop"
    (already Terminating)."""
    if force or project.status.phase in DELETE_AT_ONCE:
        return "remove"
    if project.status.phase == v1.TERMINATING:
        return "noop"
    return "mark"


def check(old: v1.Project, new: v1.Project, *, now: float) -> None:
    """Refuse a status change of `old` to `new` that the lifecycle does not allow (FailedPrecondition, or Invalid
    naming the field); record a generic Phase condition on `new` when a phase change came without one."""
    before, after = old.status.phase, new.status.phase
    name = old.metadata.name
    if after == v1.TERMINATING and before != after:
        raise FailedPrecondition(f"project {name}: Terminating is entered only through Delete")
    if not is_allowed(before, after):
        if before == after:
            if new.status != old.status:
                raise FailedPrecondition(f"project {name} is Terminated; its status is final")
            return
        raise FailedPrecondition(f"project {name}: phase {before} cannot change to {after}")
    _check_binding(old, new)
    if before != after:
        _record_phase_condition(old, new, now=now)


def _check_binding(old: v1.Project, new: v1.Project) -> None:
    before, after = old.status.phase, new.status.phase
    name = old.metadata.name
    deleting = old.metadata.HasField("deletion_timestamp")
    if deleting and before != after and after in (v1.SCHEDULED, v1.RUNNING, *UNBOUND):
        raise FailedPrecondition(f"project {name} is being deleted; it cannot become {after}")
    if after in UNBOUND and new.status.node_ref:
        raise FailedPrecondition(f"project {name}: a {after} project cannot have status.nodeRef")
    if after == v1.SCHEDULED and before == v1.PENDING and not new.status.node_ref:
        raise Invalid.of([FieldViolation("status.nodeRef", "required when binding a project (phase Scheduled)")])
    if before == after and before != v1.PENDING and new.status.node_ref != old.status.node_ref:
        raise FailedPrecondition(f"project {name}: status.nodeRef cannot change while {before}")
    if after not in UNBOUND and before not in UNBOUND and new.status.node_ref != old.status.node_ref:
        raise FailedPrecondition(f"project {name}: status.nodeRef cannot change from {before} to {after}")


def _record_phase_condition(old: v1.Project, new: v1.Project, *, now: float) -> None:
    cond = meta.get_condition(new.status.conditions, v1.CONDITION_PHASE)
    old_cond = meta.get_condition(old.status.conditions, v1.CONDITION_PHASE)
    before, after = old.status.phase, new.status.phase
    if cond is None or (old_cond is not None and cond == old_cond):
        meta.set_condition(
            new.status.conditions,
            v1.CONDITION_PHASE,
            v1.TRUE,
            reason=after,
            message=f"Phase changed from {before} to {after}",
            now=now,
        )
    elif not cond.HasField("last_transition_time") or (
        old_cond is not None and cond.last_transition_time == old_cond.last_transition_time
    ):
        cond.last_transition_time.CopyFrom(timestamp(now))


__all__ = [
    "DEFAULT_HANDOFF",
    "DELETE_AT_ONCE",
    "DELETE_VOLUMES",
    "FINISHED",
    "REASON_CREATED",
    "REASON_DELETION_REQUESTED",
    "REASON_NODE_DRAINED",
    "REASON_NODE_NO_LONGER_ELIGIBLE",
    "REASON_PREEMPTED",
    "REASON_QUOTA_RECLAIMED",
    "REASON_RESCHEDULED",
    "REASON_RESTARTED",
    "REASON_SCHEDULED",
    "REASON_SPEC_CHANGED",
    "REASON_TAINT_EVICTION",
    "REASON_UNSCHEDULABLE",
    "TRANSITIONS",
    "UNBOUND",
    "bind",
    "check",
    "deletes_volumes",
    "created",
    "delete_plan",
    "fail",
    "finish_move",
    "handed_over",
    "is_allowed",
    "lands_in",
    "mark_terminating",
    "move",
    "preempt",
    "reclaim",
    "return_to_pending",
    "run",
    "succeed",
    "terminate",
    "unschedulable",
]
