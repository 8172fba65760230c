"""Change filters: which changes call a handler (kopf's `when=`/`field=`, controller-runtime's predicates).

A filter is a function of the handler's `Context` returning a bool; a handler runs when every filter passes.

    @operator.on_update(when=field_changed("spec.interval"))
    @operator.on_update(when=[labels_changed, when(lambda ctx: ctx.obj.spec.enabled)])

They are judged on what changed since the object was last handled (`ctx.diff`), so a change that happened while
the operator was down still counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from caravanserai.operator.context import Context

Filter = Callable[[Context[Any]], bool]


def generation_changed(ctx: Context[Any]) -> bool:
    """The spec changed (the generation was bumped) since last handled."""
    return ctx.old is None or ctx.old.get("generation") != ctx.new.get("generation")


def labels_changed(ctx: Context[Any]) -> bool:
    return ctx.changed("metadata.labels")


def annotations_changed(ctx: Context[Any]) -> bool:
    return ctx.changed("metadata.annotations")


def field_changed(path: str) -> Filter:
    """The field `path` (protobuf names: `spec.keep_last`, `metadata.labels.team`) changed since last handled."""

    def changed(ctx: Context[Any]) -> bool:
        return ctx.changed(path)

    changed.__name__ = f"field_changed({path})"
    return changed


def when(predicate: Callable[[Any], bool]) -> Filter:
    """A predicate on the object itself (`ctx.obj`)."""

    def matches(ctx: Context[Any]) -> bool:
        return predicate(ctx.obj)

    return matches


def all_pass(filters: Filter | Iterable[Filter] | None) -> Filter:
    """One filter for a filter, a list of them (all must pass) or None (always passes)."""
    if filters is None:
        return lambda ctx: True
    if callable(filters):
        return filters
    listed = list(filters)
    return lambda ctx: all(f(ctx) for f in listed)


__all__ = [
    "Filter",
    "all_pass",
    "annotations_changed",
    "field_changed",
    "generation_changed",
    "labels_changed",
    "when",
]
