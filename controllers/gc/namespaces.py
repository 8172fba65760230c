"""The namespace controller: empties a namespace being deleted, then has the apiserver remove it.

    reconcile(namespace)
      1. the namespace from the cache; gone, or not being deleted → nothing
      2. every namespaced kind the server serves (the built-in ones, and custom kinds discovered through the client
         whose kind is namespaced): list the namespace's objects live, Delete each one not yet being deleted
      3. something left → the `ContentRemaining` condition (counts by resource) on the namespace's status, and
         come back after a backoff (sooner when a project of the namespace goes)
      4. nothing left → Delete the namespace again: the apiserver removes an empty Terminating namespace

Guarantees:

* **Ordinary deletes.** Each object goes through its own Delete (Background propagation), so finalizers hold it
  and a bound project is stopped gracefully by its node before it goes: the namespace waits for them.
* **Live reads.** What is left is listed from the server (never a cache), so a namespace is never reported empty
  on stale state; the apiserver checks again when it is asked to remove it.
* **Backoff.** While objects remain, the namespace is looked at again after 0.5 s, 1 s, 2 s … at most
  `max_backoff` seconds; the deletion of a project of the namespace wakes it at once.
* The condition is written only when its message changes (Conflict: read again, at most a few times).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client, apply
from caravanserai.clock import Clock
from caravanserai.controller import HandlerFactory, Result
from caravanserai.errors import FailedPrecondition, NotFound
from caravanserai.informer import CacheReader, EventHandler
from caravanserai.workqueue import WorkQueue

log = structlog.get_logger(__name__)

CONDITION_CONTENT_REMAINING = "ContentRemaining"
REASON_CONTENT_REMAINING = "SomeResourcesRemain"
DEFAULT_INITIAL_BACKOFF = 0.5
DEFAULT_MAX_BACKOFF = 10.0


def terminating(namespace: v1.Namespace | None) -> bool:
    """Whether `namespace` is being deleted."""
    return namespace is not None and namespace.metadata.HasField("deletion_timestamp")


def remaining_message(remaining: dict[str, int]) -> str:
    """`"projects: 2, secrets: 1"`: what is left, by resource (sorted)."""
    return ", ".join(f"{plural}: {count}" for plural, count in sorted(remaining.items()))


class NamespaceReconciler:
    """Deletes what a Terminating namespace holds, then the namespace (module docstring)."""

    def __init__(
        self,
        client: Client,
        namespaces: CacheReader[v1.Namespace],
        *,
        clock: Clock,
        initial_backoff: float = DEFAULT_INITIAL_BACKOFF,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
    ) -> None:
        self._client = client
        self._namespaces = namespaces
        self._clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self._failures: dict[str, int] = {}  # namespace → looks that found something left, in a row
        self.deleted: dict[str, int] = {}  # objects this replica deleted, by resource

    async def reconcile(self, key: str) -> Result:
        namespace = self._namespaces.get(key)
        if not terminating(namespace):
            self._failures.pop(key, None)
            return Result()
        assert namespace is not None
        remaining = await self._delete_contents(key)
        if not remaining:
            self._failures.pop(key, None)
            with contextlib.suppress(NotFound):
                await self._client.namespaces.delete(key)
            log.info("namespace emptied; removed", namespace=key)
            return Result(requeue_after=self.initial_backoff)  # still there (something came back): look again
        await self._report(namespace, remaining)
        return Result(requeue_after=self._next_delay(key))

    def _next_delay(self, key: str) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return float(min(self.max_backoff, self.initial_backoff * 2 ** min(failures, 32)))

    async def _kinds(self) -> list[meta.Kind]:
        """Every namespaced kind served: the built-in ones and the custom kinds the server serves now."""
        kinds = [k for k in meta.KINDS.values() if not k.cluster_scoped]
        kinds += [k for k in await self._client.discover() if k.custom and not k.cluster_scoped]
        return kinds

    async def _delete_contents(self, namespace: str) -> dict[str, int]:
        """Delete every object of `namespace` not yet being deleted; the number of objects left, by resource."""
        remaining: dict[str, int] = {}
        for kind in await self._kinds():
            objects = list(await self._client.resource(kind.plural).list(namespace=namespace))
            if objects:
                remaining[kind.plural] = len(objects)
            await self._delete_each(kind, (o for o in objects if not o.metadata.HasField("deletion_timestamp")))
        return remaining

    async def _delete_each(self, kind: meta.Kind, objects: Iterable[Any]) -> None:
        resource = self._client.resource(kind.plural)
        for obj in objects:
            try:
                await resource.delete(meta.key_of(obj))
            except NotFound:
                continue
            except FailedPrecondition as exc:  # refused as it stands: the next look tries again
                log.info("could not delete yet", resource=kind.plural, object=meta.key_of(obj), error=str(exc))
                continue
            self.deleted[kind.plural] = self.deleted.get(kind.plural, 0) + 1

    async def _report(self, namespace: v1.Namespace, remaining: dict[str, int]) -> None:
        """Set `ContentRemaining` to what is left (written only when its message changes)."""
        message = remaining_message(remaining)
        now = self._clock.now()

        def mutate(current: v1.Namespace) -> bool:
            return meta.set_condition(
                current.status.conditions,
                CONDITION_CONTENT_REMAINING,
                v1.TRUE,
                reason=REASON_CONTENT_REMAINING,
                message=message,
                now=now,
            )

        condition = meta.get_condition(namespace.status.conditions, CONDITION_CONTENT_REMAINING)
        if condition is not None and condition.message == message and condition.status == v1.TRUE:
            return
        with contextlib.suppress(NotFound):
            await apply.modify_status(self._client.namespaces, namespace.metadata.name, mutate, current=namespace)
        log.info("namespace content remaining", namespace=namespace.metadata.name, remaining=message)


def namespace_of_deleted_project(namespaces: CacheReader[v1.Namespace]) -> HandlerFactory:
    """A project deleted from a Terminating namespace → that namespace (it may be empty now)."""

    def factory(queue: WorkQueue[str]) -> EventHandler[v1.Project]:
        def on_delete(project: v1.Project) -> None:
            namespace = project.metadata.namespace
            if namespace and terminating(namespaces.get(namespace)):
                queue.add(namespace)

        return EventHandler(on_delete=on_delete, name="gc-namespace-content")

    return factory


__all__ = [
    "CONDITION_CONTENT_REMAINING",
    "DEFAULT_INITIAL_BACKOFF",
    "DEFAULT_MAX_BACKOFF",
    "NamespaceReconciler",
    "REASON_CONTENT_REMAINING",
    "namespace_of_deleted_project",
    "remaining_message",
    "terminating",
]
