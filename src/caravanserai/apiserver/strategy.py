"""What the apiserver does to an object on each verb, per kind: defaulting, the spec/status split, generation,
delete semantics; project phase changes are checked against `caravanserai.lifecycle`.

Everything here is pure: the servicer reads, calls these, and writes with a compare-and-swap.
"""

from __future__ import annotations

import uuid
from typing import Any

from caravanserai import lifecycle, meta, v1
from caravanserai.clock import timestamp
from caravanserai.errors import FailedPrecondition, FieldViolation, Invalid


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
        lifecycle.created(obj, now=now)
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
        lifecycle.check(old, merged, now=now)
    return merged


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
        return bool(obj.status.phase in lifecycle.DELETE_AT_ONCE)
    return True


__all__ = [
    "mark_deleted",
    "prepare_create",
    "prepare_status",
    "prepare_update",
    "removable_after_update",
]
