"""What `patch` and `edit` share: from a changed manifest form of an object to the object to Update.

An Update writes labels, annotations, finalizers and spec. Everything else is the server's or a controller's
(`status`, `metadata.uid`, `generation`, creation and deletion timestamps) or names the object (`apiVersion`,
`kind`, `metadata.name`): a change to any of those is refused naming the field, never silently dropped.
`metadata.resourceVersion` is the precondition: left as read, the write conflicts when someone wrote since.
"""

from __future__ import annotations

from typing import Any

from caravanserai import meta
from caravanserai.errors import FieldViolation, Invalid

# Manifest fields an Update cannot change (camelCase paths), and why.
READ_ONLY: dict[str, str] = {
    "apiVersion": "cannot be changed",
    "kind": "cannot be changed",
    "metadata.name": "cannot be changed (create a new object instead)",
    "metadata.uid": "is set by the server",
    "metadata.generation": "is set by the server",
    "metadata.creationTimestamp": "is set by the server",
    "metadata.deletionTimestamp": "is set by delete",
    "status": "is written by controllers and agents, not by this command",
}


def _at(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def read_only_changes(before: dict[str, Any], after: dict[str, Any]) -> list[FieldViolation]:
    """The read-only fields whose value differs between two manifest forms of one object."""
    return [FieldViolation(path, why) for path, why in READ_ONLY.items() if _at(before, path) != _at(after, path)]


def to_update(live: Any, edited: Any) -> Any:
    """The object to Update: `live` with the labels, annotations, finalizers and spec of `edited`, at the
    resource version `edited` carries (the one read, unless the user changed it)."""
    out = meta.copy(live)
    out.metadata.labels.clear()
    out.metadata.labels.update(edited.metadata.labels)
    out.metadata.annotations.clear()
    out.metadata.annotations.update(edited.metadata.annotations)
    del out.metadata.finalizers[:]
    out.metadata.finalizers.extend(edited.metadata.finalizers)
    out.spec.CopyFrom(edited.spec)
    out.metadata.resource_version = edited.metadata.resource_version or live.metadata.resource_version
    return out


def check_read_only(before: dict[str, Any], after: dict[str, Any], *, what: str) -> None:
    """Invalid naming every read-only field changed from `before` to `after`."""
    violations = read_only_changes(before, after)
    if violations:
        raise Invalid.of(violations, what=what)


def unchanged(live: Any, wanted: Any) -> bool:
    """Whether an Update of `live` to `wanted` would change nothing."""
    return bool(
        live.spec == wanted.spec
        and live.metadata.labels == wanted.metadata.labels
        and live.metadata.annotations == wanted.metadata.annotations
        and list(live.metadata.finalizers) == list(wanted.metadata.finalizers)
    )


__all__ = ["READ_ONLY", "check_read_only", "read_only_changes", "to_update", "unchanged"]
