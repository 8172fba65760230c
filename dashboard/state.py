"""The dashboard's view of the cluster: one shared informer per kind of the client's kind table, and change
notifications for every connected browser.

* **Generic over kinds.** Informers are made for every kind of the client's kind table (built-in and custom kinds
  alike); every `kinds_interval` seconds the client discovers the custom kinds the server serves (`Client.discover`)
  and informers are added for kinds the table gained, so a kind defined at run time appears without a dashboard change.
* **Pushed, coalesced.** Each browser holds a `Subscription`. Every informer change is added to every
  subscription's pending set (resource and name → change type) and wakes it; the stream sends what accumulated,
  at most once per `coalesce` seconds, so a burst of changes is one message and a change reaches the browser
  within `coalesce` plus the informer's own delay (well under a second).
* **Capped.** A subscription remembers at most `MAX_PENDING_NAMES` names; beyond that it keeps only which
  resources changed (the page reloads those wholesale). A stuck browser costs a capped set, never a queue.
* The caches are read-only: views copy what they need into plain data (`caravanserai.dashboard.views`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import structlog

from caravanserai import meta
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.errors import CaravanseraiError
from caravanserai.informer import EventHandler, Informer, SharedInformerFactory

log = structlog.get_logger(__name__)

MAX_PENDING_NAMES = 500


@dataclass
class BrowserUpdate:
    """What a browser is told: resources that changed, and (unless too many) which objects and how."""

    resources: list[str]
    objects: list[dict[str, str]]


@dataclass(eq=False)
class Subscription:
    """One browser's pending changes; see the module docstring."""

    _resources: set[str] = field(default_factory=set)
    _objects: dict[tuple[str, str], str] = field(default_factory=dict)
    _overflow: bool = False
    _wakeup: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, resource: str, type_: str, key: str) -> None:
        """Note a change of the object `key` ("namespace/name", or "name" for a cluster-wide one) of `resource`."""
        self._resources.add(resource)
        if not self._overflow:
            self._objects[(resource, key)] = type_
            if len(self._objects) > MAX_PENDING_NAMES:
                self._overflow = True
                self._objects.clear()
        self._wakeup.set()

    async def next(self, *, clock: Clock, coalesce: float, timeout: float) -> BrowserUpdate | None:
        """What changed since the last call, after waiting for a first change (None after `timeout` without)."""
        if not self._resources:
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except TimeoutError:
                return None
            await clock.sleep(coalesce)
        update = BrowserUpdate(
            sorted(self._resources),
            [_changed(r, k, t) for (r, k), t in sorted(self._objects.items())],
        )
        self._resources.clear()
        self._objects.clear()
        self._overflow = False
        return update


def _changed(resource: str, key: str, type_: str) -> dict[str, str]:
    namespace, name = meta.split_key(key)
    return {"resource": resource, "namespace": namespace, "name": name, "type": type_}


def known_kinds() -> list[meta.Kind]:
    """Every kind of this process's kind table: the built-in ones and the custom kinds registered, except
    confidential ones (Secrets: the dashboard never shows their values)."""
    return [k for k in meta.registered() if not k.confidential]


class ClusterView:
    """The dashboard's view of the cluster: informers over every known kind; `run()` runs them until cancelled."""

    def __init__(self, client: Client, *, clock: Clock, kinds_interval: float = 5.0) -> None:
        self.client = client
        self.clock = clock
        self.factory = SharedInformerFactory(client, clock=clock)
        self.informers: dict[str, Informer[Any]] = {}
        self._kinds: dict[str, meta.Kind] = {}
        self._served: set[str] = set()  # custom kinds the server serves, as last discovered
        self._subscriptions: set[Subscription] = set()
        self._kinds_interval = kinds_interval
        self.refresh_kinds()

    @property
    def kinds(self) -> dict[str, meta.Kind]:
        """The kinds watched and served, by plural (a custom kind whose definition is gone is left out)."""
        return {p: k for p, k in self._kinds.items() if not k.custom or p in self._served}

    def refresh_kinds(self) -> None:
        """Make an informer for every kind of the kind table that has none yet (custom kinds: once discovered on the
        server)."""
        for kind in known_kinds():
            if kind.custom and kind.plural not in self._served:
                continue  # registered in this process, but not (or no longer) served by our API server
            if kind.plural not in self.informers:
                informer: Informer[Any] = self.factory.informer(kind.plural)
                informer.add_event_handler(self._handler(kind.plural))
                self.informers[kind.plural] = informer
                self._kinds[kind.plural] = kind
                log.info("dashboard watches a kind", resource=kind.plural)

    async def discover_kinds(self) -> None:
        """Ask the server for the custom kinds it serves (when the client can), then watch any new one."""
        try:
            found = await self.client.discover()
        except CaravanseraiError as exc:
            log.warning("discovering custom kinds failed; retrying later", error=str(exc))
        else:
            self._served = {k.plural for k in found if k.custom}
        self.refresh_kinds()

    def objects(self, resource: str) -> list[Any]:
        """The cached objects of `resource` (read-only). KeyError for a kind not watched."""
        return self.informers[resource].list()

    def get(self, resource: str, name: str, namespace: str = "") -> Any | None:
        """The cached object `name` of `resource`: in `namespace` (default "default") for a namespaced kind."""
        if not self._kinds[resource].cluster_scoped:
            return self.informers[resource].get(meta.join_key(namespace or meta.DEFAULT_NAMESPACE, name))
        return self.informers[resource].get(name)

    def synced(self) -> bool:
        return self.factory.has_synced()

    async def wait_synced(self, *resources: str) -> None:
        """Wait until the informers of `resources` have synced (KeyError for a kind not watched)."""
        for resource in resources:
            await self.informers[resource].wait_synced()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.factory.run(), name="dashboard-informers")
            group.create_task(self._refresh_forever(), name="dashboard-kinds")

    async def _refresh_forever(self) -> None:
        while True:
            await self.discover_kinds()
            await self.clock.sleep(self._kinds_interval)

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[Subscription]:
        """A subscription to every change, for as long as the `with` block runs."""
        subscription = Subscription()
        self._subscriptions.add(subscription)
        try:
            yield subscription
        finally:
            self._subscriptions.discard(subscription)

    def _handler(self, resource: str) -> EventHandler[Any]:
        def added(obj: Any) -> None:
            self._notify(resource, "ADDED", obj)

        def updated(_old: Any, new: Any) -> None:
            self._notify(resource, "MODIFIED", new)

        def deleted(obj: Any) -> None:
            self._notify(resource, "DELETED", obj)

        return EventHandler(added, updated, deleted, name="dashboard")

    def _notify(self, resource: str, type_: str, obj: Any) -> None:
        for subscription in self._subscriptions:
            subscription.add(resource, type_, meta.key_of(obj))


__all__ = ["BrowserUpdate", "ClusterView", "Subscription"]
