"""Serving custom kinds: every apiserver follows the stored ResourceDefinitions and serves their kinds.

`DefinitionServer.run()` watches the `resourcedefinitions` watch cache (no extra etcd watch) and, after every
change, brings the served custom kinds in step with the stored definitions:

* a new definition → a `CustomKindStrategy` and a `WatchCache` of its own, served at once (well within a second
  of the definition's write on every apiserver);
* a changed definition (its spec) → the kind is served again with the new classes; its watchers are closed and
  resume from their last version on the new cache;
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
        service.find_kind = self.find_kind

    async def run(self) -> None:
        cache = self._service.cache(DEFINITIONS)
        changed = asyncio.Event()
        cache.add_listener(changed.set)
        try:
            await cache.ready.wait()
            while True:
                changed.clear()
                self._sync(cache.objects)
                self.synced.set()
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

    def _sync(self, stored: dict[str, Any]) -> None:
        wanted = _wanted(stored)
        for plural, (strategy, _task) in list(self._served.items()):
            definition = wanted.get(plural)
            if definition is None or definition.spec != strategy.definition.spec:
                self._unserve(
                    plural, f"the definition of {plural} changed or was deleted; resume to see the kind again"
                )
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
            history_revisions=self._history_revisions,
            history_bytes=self._history_bytes,
            history_budget=self._history_budget,
        )
        task = asyncio.create_task(cache.run(), name=f"watchcache-{strategy.plural}")
        self._service.serve(strategy, cache)
        self._served[strategy.plural] = (strategy, task)
        log.info("serving custom kind", kind=strategy.kind.kind, resource=strategy.plural, group=strategy.kind.group)

    def _unserve(self, plural: str, reason: str) -> None:
        _strategy, task = self._served.pop(plural)
        cache = self._service.unserve(plural)
        if cache is not None:
            cache.close(reason)
        task.cancel()
        log.info("stopped serving custom kind", resource=plural)


def _wanted(stored: dict[str, Any]) -> dict[str, Any]:
    """plural → definition, of the stored definitions named as they must be (`<plural>.<group>`)."""
    return {
        d.spec.plural: d for d in stored.values() if d.metadata.name == definition_name(d.spec.plural, d.spec.group)
    }


__all__ = ["DefinitionServer"]
