"""Serving custom kinds: every apiserver follows the stored ResourceDefinitions and serves their kinds.

`DefinitionServer.run()` watches the `resourcedefinitions` watch cache (no extra etcd watch) and, after every
change, brings the served custom kinds in step with the stored definitions:

* a new definition → a `CustomKindStrategy` and a `WatchCache` of its own, served at once (well within a second
  of the definition's write on every apiserver);
* a changed definition (its spec) with the same kind name → the kind is served with the new classes at once, on
  the same watch cache: watches on the kind go on (the apiserver accepted the change only because the new schema
  reads every stored object); a definition whose kind name changed (stored data written otherwise) is served
  anew, its watchers closed;
* a definition marked for deletion (its objects held by finalizers) → still served, new objects refused; once
  the kind's watch cache holds no object, the definition is removed (compare-and-swap, with any object left);
* a deleted definition → the kind is no longer served, its watchers are closed.

A request for a resource this apiserver does not serve first asks etcd whether a definition of it is stored
(`find_kind`); if so it waits for this apiserver to follow it (at most 5 s) instead of refusing the resource. So a
client that defines a kind through one apiserver (or one worker of `--workers N`) and at once creates an object
through another is served, not told the resource is unknown.

A definition whose schema does not build, whose name is not `<plural>.<group>` or whose names clash with a kind
already served is skipped and logged (the apiserver refuses such definitions on write; this only guards against
stored data written otherwise). Returns only when cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import structlog

from caravanserai import v1
from caravanserai.apiserver import codec
from caravanserai.apiserver.kinds.custom import CustomKindStrategy
from caravanserai.apiserver.kinds.definition import SERVED_WITHIN
from caravanserai.apiserver.service import ResourceService
from caravanserai.apiserver.watchcache import WatchCache
from caravanserai.apiserver.watchhistory import HistoryBudget
from caravanserai.customkinds.schemas import SchemaError, definition_name
from caravanserai.errors import ApiError, Conflict, NotFound
from caravanserai.storage import Store

log = structlog.get_logger(__name__)

DEFINITIONS = "resourcedefinitions"


class DefinitionServer:
    """Keeps one apiserver's custom kinds in step with the stored ResourceDefinitions."""

    def __init__(
        self,
        service: ResourceService,
        store: Store,
        *,
        history_revisions: int = 10_000,
        history_bytes: int | None = None,
        history_budget: HistoryBudget | None = None,
    ) -> None:
        self._service = service
        self._store = store
        self._history_revisions = history_revisions
        self._history_bytes = history_bytes
        self._history_budget = history_budget
        self._served: dict[str, tuple[CustomKindStrategy, asyncio.Task[None]]] = {}  # plural → (strategy, task)
        self.synced = asyncio.Event()  # set after the first pass over the stored definitions
        self._changed = asyncio.Event()  # a definition, or an object of a kind being deleted, changed
        service.find_kind = self.find_kind

    async def run(self) -> None:
        cache = self._service.cache(DEFINITIONS)
        changed = self._changed
        cache.add_listener(changed.set)
        try:
            await cache.ready.wait()
            while True:
                changed.clear()
                self._sync(cache.objects)
                self.synced.set()
                await self._remove_finished()
                await changed.wait()
        finally:
            for plural in list(self._served):
                self._unserve(plural, "apiserver shutting down")

    async def find_kind(self, plural: str) -> None:
        """Return once `plural` is served here when etcd holds a definition of it that this apiserver has not
        followed yet (at most `SERVED_WITHIN` s); at once when etcd holds none. One etcd read, made only for
        resources this apiserver does not serve. This is what makes a definition's reply ("this apiserver serves
        the kind") hold for every apiserver and every worker: one that lags behind waits instead of refusing."""
        stored: dict[str, Any] = {}
        async for page in self._store.pages(DEFINITIONS):
            for item in page.items:
                stored[item.name] = codec.decode(v1.ResourceDefinition, item.value, item.mod_revision)
        if plural not in _wanted(stored):
            return
        if not await self._service.kinds.wait_until(lambda kinds: plural in kinds, SERVED_WITHIN):
            log.warning("a stored definition's kind is not served here yet", resource=plural)

    def _sync(self, stored: Mapping[str, Any]) -> None:
        wanted = _wanted(stored)
        for plural, (strategy, _task) in list(self._served.items()):
            definition = wanted.get(plural)
            if definition is not None and _served_as(definition) != _served_as(strategy.definition):
                self._reserve(plural, definition)
            elif definition is None:
                self._unserve(plural, f"the definition of {plural} was deleted")
        for plural, definition in sorted(wanted.items()):
            if plural not in self._served:
                self._serve(definition)

    def _serve(self, definition: Any) -> None:
        name = definition.metadata.name
        if definition.spec.plural in self._service.kinds:
            log.warning("definition clashes with a served kind; not served", definition=name)
            return
        try:
            strategy = CustomKindStrategy(definition)
        except SchemaError as exc:
            log.warning("definition schema does not build; not served", definition=name, error=str(exc))
            return
        cache = WatchCache(
            self._store,
            strategy.kind,
            decoded=strategy.cache_decoded,
            history_revisions=self._history_revisions,
            history_bytes=self._history_bytes,
            history_budget=self._history_budget,
        )
        cache.add_listener(self._changed.set)
        task = asyncio.create_task(cache.run(), name=f"watchcache-{strategy.plural}")
        self._service.serve(strategy, cache)
        self._served[strategy.plural] = (strategy, task)
        log.info("serving custom kind", kind=strategy.kind.kind, resource=strategy.plural, group=strategy.kind.group)

    def _reserve(self, plural: str, definition: Any) -> None:
        """Serve a changed definition of a served kind with its new classes on the same watch cache (watches go
        on); served anew when the kind's name changed or the new schema does not build."""
        old, task = self._served[plural]
        try:
            strategy = CustomKindStrategy(definition)
        except SchemaError:
            strategy = None
        if strategy is None or strategy.kind.kind != old.kind.kind:
            self._unserve(plural, f"the definition of {plural} changed its kind; resume to see the kind again")
            return
        self._service.cache(plural).rekind(strategy.kind)
        self._service.kinds.add(strategy)
        self._served[plural] = (strategy, task)
        log.info("serving the updated definition of a custom kind", kind=strategy.kind.kind, resource=plural)

    def _unserve(self, plural: str, reason: str) -> None:
        _strategy, task = self._served.pop(plural)
        cache = self._service.unserve(plural)
        if cache is not None:
            cache.close(reason)
        task.cancel()
        log.info("stopped serving custom kind", resource=plural)

    async def _remove_finished(self) -> None:
        """Remove each definition marked for deletion whose kind holds no object any more, in its watch cache and
        then in etcd (every apiserver tries; the compare-and-swap lets one succeed, the others see NotFound or
        Conflict and let it be)."""
        stored = self._service.cache(DEFINITIONS).objects
        for plural, (strategy, _task) in list(self._served.items()):
            definition = stored.get(strategy.definition.metadata.name)
            cache = self._service.cache(plural)
            if definition is None:
                continue
            if not definition.metadata.HasField("deletion_timestamp") or not cache.ready.is_set() or cache.objects:
                continue
            try:
                if (await self._store.list(plural, limit=1)).items:
                    continue  # the cache lags behind etcd: an object is still there (its change will wake us)
                await self._store.delete_with_contents(
                    DEFINITIONS,
                    definition.metadata.name,
                    expected_revision=int(definition.metadata.resource_version),
                    contents=plural,
                )
                log.info("removed a deleted definition after its last object", definition=definition.metadata.name)
            except (Conflict, NotFound):
                pass  # another apiserver removed it, or it changed: the next pass looks again
            except ApiError as exc:
                log.warning(
                    "could not remove a deleted definition", definition=definition.metadata.name, error=str(exc)
                )


def _served_as(definition: Any) -> tuple[Any, bool]:
    """What serving a definition depends on: its spec, and whether it is marked for deletion."""
    return definition.spec, definition.metadata.HasField("deletion_timestamp")


def _wanted(stored: Mapping[str, Any]) -> dict[str, Any]:
    """plural → definition, of the stored definitions named as they must be (`<plural>.<group>`)."""
    return {
        d.spec.plural: d for d in stored.values() if d.metadata.name == definition_name(d.spec.plural, d.spec.group)
    }


__all__ = ["DefinitionServer"]
