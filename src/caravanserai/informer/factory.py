"""SharedInformerFactory: one informer (one list+watch, one cache) per (kind, selectors), shared by every
controller of a process.

    factory = SharedInformerFactory(client)
    projects = factory.informer(v1.Project)                      # the same object for every caller
    bound = factory.informer(v1.Project, field_selector="status.phase=Scheduled")   # a second watch
    async with asyncio.TaskGroup() as group:
        group.create_task(factory.run())
        await factory.wait_synced()

Guarantees:

* Asking twice for the same kind and selectors returns the same `Informer`; indexers asked for by later callers
  are added to it.
* `run()` runs every informer made so far, and starts those made while it runs; it returns only when cancelled,
  and raises the first informer's failure (a cache mutation with the detector on).
* Every informer shares the factory's clock, resync period, mutation-detector setting and watch settings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, TypeVar, overload

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.client.resumable import WatchOptions
from caravanserai.clock import Clock, SystemClock
from caravanserai.informer.indexer import IndexFunc
from caravanserai.informer.informer import Informer

T = TypeVar("T", v1.Project, v1.Node, v1.Lease, v1.Event, v1.ProjectSet, v1.Namespace, v1.ResourceQuota, v1.Route)

InformerKey = tuple[str, str, str]  # (plural resource, label selector, field selector)


class SharedInformerFactory:
    """Makes and runs the shared informers of one process."""

    def __init__(
        self,
        client: Client,
        *,
        clock: Clock | None = None,
        resync_period: float = 0.0,
        detect_mutations: bool | None = None,
        watch_options: WatchOptions = WatchOptions(),
        compact: bool = True,
    ) -> None:
        self._client = client
        self._clock: Clock = clock or SystemClock()
        self._options: dict[str, Any] = {
            "resync_period": resync_period,
            "detect_mutations": detect_mutations,
            "watch_options": watch_options,
            "compact": compact,
        }
        self._informers: dict[InformerKey, Informer[Any]] = {}
        self._group: asyncio.TaskGroup | None = None  # set while run() runs, to start late informers

    @overload
    def informer(
        self,
        resource: type[T],
        *,
        label_selector: str = ...,
        field_selector: str = ...,
        indexers: Mapping[str, IndexFunc] | None = ...,
    ) -> Informer[T]: ...

    @overload
    def informer(
        self,
        resource: str,
        *,
        label_selector: str = ...,
        field_selector: str = ...,
        indexers: Mapping[str, IndexFunc] | None = ...,
    ) -> Informer[Any]: ...

    def informer(
        self,
        resource: type[Any] | str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        indexers: Mapping[str, IndexFunc] | None = None,
    ) -> Informer[Any]:
        """The shared informer for a kind (a message class such as `v1.Project`, or a resource name such as
        "projects") and selectors; made on first request."""
        if isinstance(resource, str):
            plural = meta.kind_for(resource).plural
        else:
            plural = meta.kind_named(resource.DESCRIPTOR.name).plural
        key = (plural, label_selector, field_selector)
        informer = self._informers.get(key)
        if informer is None:
            informer = Informer(
                self._client.resource(plural),
                label_selector=label_selector,
                field_selector=field_selector,
                clock=self._clock,
                **self._options,
            )
            self._informers[key] = informer
            if self._group is not None:
                self._start(self._group, informer)
        if indexers:
            informer.add_indexers(indexers)
        return informer

    def informers(self) -> list[Informer[Any]]:
        """Every informer made so far."""
        return list(self._informers.values())

    def has_synced(self) -> bool:
        """Whether every informer made so far has synced."""
        return all(informer.has_synced() for informer in self._informers.values())

    async def wait_synced(self) -> None:
        """Wait until every informer made so far has synced."""
        for informer in list(self._informers.values()):
            await informer.wait_synced()

    async def run(self) -> None:
        """Run every informer (including ones made later) until cancelled."""
        if self._group is not None:
            raise RuntimeError("the informer factory is already running")
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                for informer in self._informers.values():
                    self._start(group, informer)
                await asyncio.Event().wait()  # until cancelled, or an informer fails
        except BaseExceptionGroup as failed:
            raise failed.exceptions[0] from None
        finally:
            self._group = None

    @staticmethod
    def _start(group: asyncio.TaskGroup, informer: Informer[Any]) -> None:
        selectors = ",".join(s for s in (informer.label_selector, informer.field_selector) if s)
        group.create_task(
            informer.run(), name=f"informer-{informer.resource}" + (f"[{selectors}]" if selectors else "")
        )


__all__ = ["SharedInformerFactory"]
