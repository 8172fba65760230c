"""What the apiserver does to an object on each verb, per kind: defaulting, the spec/status split, generation,
the project phase transition table (DESIGN §4) and delete semantics.

Everything here is pure: the servicer reads, calls these, and writes with a compare-and-swap.
"""

from __future__ import annotations

import uuid
from typing import Any

from caravanserai import meta, v1
from caravanserai.clock import timestamp
from caravanserai.errors import FailedPrecondition, FieldViolation, Invalid

# Legal project phase changes made through UpdateStatus (old → allowed new). Staying in a phase is always legal
# except for Terminated. Entering Terminating happens only through Delete.
TRANSITIONS: dict[str, frozenset[str]] = {
    v1.PENDING: frozenset({v1.SCHEDULED}),
    v1.SCHEDULED: frozenset({v1.RUNNING, v1.FAILED, v1.PENDING}),
    v1.RUNNING: frozenset({v1.FAILED, v1.PENDING}),
    v1.FAILED: frozenset(),
    v1.TERMINATING: frozenset({v1.TERMINATED}),
    v1.TERMINATED: frozenset(),
}
# Phases whose project is removed at once by Delete (nothing runs anywhere).
DELETE_AT_ONCE = frozenset({v1.PENDING, v1.FAILED, v1.TERMINATED, ""})


def _clear_status(obj: Any) -> None:
    obj.ClearField("status")


def prepare_create(resource: str, obj: Any, *, now: float) -> None:
    """Default a new object in place: type meta, uid, creation time, generation 1, project phase Pending.

    Client-set status, resource_version, uid or deletion timestamp are refused for kinds with a status.
    """
    violations: list[FieldViolation] = []
    if obj.metadata.resource_version:
        violations.append(FieldViolation("metadata.resourceVersion", "must not be set on create"))
    if obj.metadata.HasField("deletion_timestamp"):
        violations.append(FieldViolation("metadata.deletionTimestamp", "must not be set on create"))
    if obj.HasField("status") and obj.status.ByteSize() and resource in ("projects", "nodes"):
        violations.append(FieldViolation("status", "must not be set on create; use UpdateStatus"))
    if violations:
        raise Invalid.of(violations, what=meta.kind_for(resource).kind)
    meta.with_type_meta(obj)
    obj.metadata.uid = str(uuid.uuid4())
    obj.metadata.generation = 1
    obj.metadata.creation_timestamp.CopyFrom(timestamp(now))
    if resource == "projects":
        meta.set_phase(obj, v1.PENDING, reason="Created", message="Project accepted; waiting to be scheduled", now=now)
    elif resource == "nodes":
        obj.status.state = v1.NODE_NOT_READY


def _require_version(obj: Any, resource: str) -> None:
    if not obj.metadata.resource_version:
        raise Invalid.of(
            [FieldViolation("metadata.resourceVersion", "required: pass the version you read")],
            what=meta.kind_for(resource).kind,
        )


def prepare_update(resource: str, old: Any, new: Any) -> Any:
    """The object to store for an Update of `old` with `new`: new metadata (labels, annotations, finalizers) and
    spec, everything else from `old`; generation bumped when the spec changed.

    Returns the merged object (a fresh message); `old` and `new` are not modified.
    """
    _require_version(new, resource)
    merged = meta.copy(old)
    merged.spec.CopyFrom(new.spec)
    merged.metadata.labels.clear()
    merged.metadata.labels.update(new.metadata.labels)
    merged.metadata.annotations.clear()
    merged.metadata.annotations.update(new.metadata.annotations)
    del merged.metadata.finalizers[:]
    merged.metadata.finalizers.extend(new.metadata.finalizers)
    if merged.spec != old.spec:
        merged.metadata.generation = old.metadata.generation + 1
    if old.metadata.HasField("deletion_timestamp") and merged.spec != old.spec and resource == "projects":
        raise FailedPrecondition(f"project {old.metadata.name} is being deleted; its spec cannot change")
    return merged


def prepare_status(resource: str, old: Any, new: Any, *, now: float) -> Any:
    """The object to store for an UpdateStatus of `old` with `new`: new status, everything else from `old`.

    For projects the phase transition table is enforced (FailedPrecondition) and every phase change leaves a
    `Phase` condition: when the writer did not record one itself, the server records a generic one.
    """
    _require_version(new, resource)
    merged = meta.copy(old)
    merged.status.CopyFrom(new.status)
    if resource == "projects":
        _check_project_transition(old, merged, now=now)
    return merged


def _check_project_transition(old: v1.Project, new: v1.Project, *, now: float) -> None:
    before, after = old.status.phase, new.status.phase
    name = old.metadata.name
    if before != after and after not in TRANSITIONS.get(before, frozenset()):
        raise FailedPrecondition(f"project {name}: phase {before} cannot change to {after}")
    if before == after == v1.TERMINATED and new.status != old.status:
        raise FailedPrecondition(f"project {name} is Terminated; its status is final")
    if after == v1.PENDING and new.status.node_ref:
        raise FailedPrecondition(f"project {name}: a Pending project cannot have status.nodeRef")
    if after == v1.SCHEDULED and before == v1.PENDING and not new.status.node_ref:
        raise Invalid.of([FieldViolation("status.nodeRef", "required when binding a project (phase Scheduled)")])
    if before == after and before != v1.PENDING and new.status.node_ref != old.status.node_ref:
        raise FailedPrecondition(f"project {name}: status.nodeRef cannot change while {before}")
    if before != after:
        cond = meta.get_condition(new.status.conditions, v1.CONDITION_PHASE)
        old_cond = meta.get_condition(old.status.conditions, v1.CONDITION_PHASE)
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


def project_delete_plan(project: v1.Project, *, force: bool) -> str:
    """What Delete does to a project: "remove" (the record goes now), "mark" (becomes Terminating) or "noop"
    (already Terminating)."""
    if force or project.status.phase in DELETE_AT_ONCE:
        return "remove"
    if project.status.phase == v1.TERMINATING:
        return "noop"
    return "mark"


def mark_terminating(project: v1.Project, *, now: float) -> v1.Project:
    """A copy of `project` marked for deletion: deletion_timestamp and phase Terminating (reason
    DeletionRequested)."""
    marked = meta.copy(project)
    marked.metadata.deletion_timestamp.CopyFrom(timestamp(now))
    meta.set_phase(
        marked,
        v1.TERMINATING,
        reason="DeletionRequested",
        message="Deletion requested; waiting for the agent to remove the containers",
        now=now,
    )
    return marked


def mark_deleted(obj: Any, *, now: float) -> Any:
    """A copy of a non-project object with finalizers, marked with deletion_timestamp."""
    marked = meta.copy(obj)
    if not marked.metadata.HasField("deletion_timestamp"):
        marked.metadata.deletion_timestamp.CopyFrom(timestamp(now))
    return marked


def removable_after_update(resource: str, obj: Any) -> bool:
    """True when an updated object should now disappear: deletion was requested and the last finalizer is gone
    (projects additionally must not be active any more)."""
    if not obj.metadata.HasField("deletion_timestamp") or obj.metadata.finalizers:
        return False
    if resource == "projects":
        return bool(obj.status.phase in DELETE_AT_ONCE)
    return True


__all__ = [
    "DELETE_AT_ONCE",
    "TRANSITIONS",
    "mark_deleted",
    "mark_terminating",
    "prepare_create",
    "prepare_status",
    "prepare_update",
    "project_delete_plan",
    "removable_after_update",
]
