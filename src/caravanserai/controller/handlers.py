"""Event handlers that turn informer notifications into work-queue keys.

A controller watches informers through *handler factories*: functions that take the controller's queue and
return an `EventHandler`. Two are provided:

* `enqueue_object`: the key is the object's key, `meta.key_of` ("namespace/name" for a namespaced kind, the name
  for a cluster-wide one: a Project change → that project's key). Optional `predicate`
  filters objects (checked on the new state, and on the old one for updates, so leaving the filter counts).
* `enqueue_mapped(fn)`: `fn(obj)` returns the keys to reconcile, e.g. a Node change → the keys of the Pending
  projects that might now fit. For an update both the old and the new object are mapped (a label removed from a
  node concerns the projects that selected the old label).

Handlers only add keys (never block, never read the server): the reconcile does the work. Resync notifications
(`on_update(obj, obj)`) add the key like any other update.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from caravanserai import meta
from caravanserai.informer import EventHandler
from caravanserai.workqueue import WorkQueue

HandlerFactory = Callable[[WorkQueue[str]], EventHandler[Any]]


def enqueue_object(queue: WorkQueue[str], *, predicate: Callable[[Any], bool] | None = None) -> EventHandler[Any]:
    """A handler adding the changed object's key (`meta.key_of`) to `queue` (only objects matching `predicate`, when
    given)."""

    def matches(obj: Any) -> bool:
        return predicate is None or predicate(obj)

    def on_add(obj: Any) -> None:
        if matches(obj):
            queue.add(meta.key_of(obj))

    def on_update(old: Any, new: Any) -> None:
        if matches(new) or matches(old):
            queue.add(meta.key_of(new))

    return EventHandler(on_add, on_update, on_add, name="enqueue_object")


def enqueue_matching(predicate: Callable[[Any], bool]) -> HandlerFactory:
    """A factory for `enqueue_object` restricted to objects matching `predicate`."""

    def factory(queue: WorkQueue[str]) -> EventHandler[Any]:
        return enqueue_object(queue, predicate=predicate)

    return factory


def enqueue_mapped(fn: Callable[[Any], Iterable[str]]) -> HandlerFactory:
    """A factory of handlers adding the keys `fn(obj)` returns (for both states of an update)."""

    def factory(queue: WorkQueue[str]) -> EventHandler[Any]:
        def on_add(obj: Any) -> None:
            for key in fn(obj):
                queue.add(key)

        def on_update(old: Any, new: Any) -> None:
            for key in {*fn(old), *fn(new)}:
                queue.add(key)

        return EventHandler(on_add, on_update, on_add, name=f"enqueue_mapped({getattr(fn, '__name__', 'fn')})")

    return factory


__all__ = ["HandlerFactory", "enqueue_mapped", "enqueue_matching", "enqueue_object"]
