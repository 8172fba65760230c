"""The Reflector keeps a cache in step with the API: the resumable watch, delivered into a `Sink`.

The resume protocol itself (list, watch from the version, resume after errors with jittered backoff, relist on
Expired, restart a silent watch, recycle watches) is written once, in `caravanserai.client.resumable`, and is
shared with the CLI. The reflector adds what a cache needs:

* every `Listed` *replaces* the sink's contents (objects it held that are absent now become deletions, changed
  ones updates, new ones adds); every change is applied in order;
* any failure of the list or the watch is retried (client-go's numbers: 0.8 s · 2ⁿ capped at 30 s, each delay
  stretched by up to 100 % at random, reset after 2 minutes without failure or by any progress); each watch is
  recycled after a random 5 to 10 minutes (the defaults of `WatchOptions`, which the reflector passes on whole);
* back-pressure: the sink applies events synchronously (cache writes never wait for handlers); when its
  consumers fall behind, `wait_for_room()` holds the stream back, which counts as activity, not silence;
* a failure of the sink itself (a `CacheMutationError`, a failing index function) is raised from `run()`:
  retrying would fail the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar

import structlog

from caravanserai.client import ResourceClient
from caravanserai.client.resumable import Listed, ResumableWatch, WatchIdle, WatchOptions
from caravanserai.clock import Clock

log = structlog.get_logger(__name__)

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


class Sink(Protocol[T_contra]):
    """Where a Reflector delivers what it reads: the informer."""

    def replace(self, objects: Sequence[T_contra], resource_version: str) -> None:
        """The complete current set of objects, as of `resource_version` (after every list)."""
        ...

    def apply(self, event_type: str, obj: T_contra) -> None:
        """One watch event: ADDED, MODIFIED or DELETED (bookmarks are not passed on)."""
        ...

    def full(self) -> bool:
        """Whether consumers are behind, so the stream should wait for `wait_for_room`."""
        ...

    async def wait_for_room(self) -> None: ...


class Reflector(Generic[T]):
    """Lists and watches one kind (with optional selectors) into a `Sink`; see the module docstring."""

    def __init__(
        self,
        client: ResourceClient[Any],
        sink: Sink[T],
        *,
        label_selector: str = "",
        field_selector: str = "",
        clock: Clock | None = None,
        watch_options: WatchOptions = WatchOptions(),
    ) -> None:
        self._sink = sink
        self._watch: ResumableWatch[T] = ResumableWatch(
            client,
            label_selector=label_selector,
            field_selector=field_selector,
            clock=clock,
            watch_options=watch_options,
            logger=log.bind(resource=client.resource, labels=label_selector, fields=field_selector),
        )

    @property
    def resource_version(self) -> str:
        """Everything up to this version has been handed to the sink ("" before the first list)."""
        return self._watch.resource_version

    @property
    def lists(self) -> int:
        """Completed lists (the first one and every relist)."""
        return self._watch.lists

    @property
    def failure(self) -> str | None:
        """Why listing or watching fails now (None while it works: since the last list, change or bookmark)."""
        return self._watch.failure

    @property
    def watches(self) -> int:
        """Watches started."""
        return self._watch.watches

    @property
    def events(self) -> int:
        """Events and bookmarks received."""
        return self._watch.events

    async def run(self) -> None:
        """List and watch until cancelled; raises only when the sink fails."""
        sink = self._sink
        async with contextlib.aclosing(self._watch.changes()) as changes:
            async for item in changes:
                if isinstance(item, Listed):
                    sink.replace(item.objects, item.resource_version)
                else:
                    sink.apply(item.type, item.object)
                del item  # not kept while waiting for the next change (a list would live as long)
                if sink.full():
                    await sink.wait_for_room()


__all__ = ["Reflector", "Sink", "WatchIdle", "WatchOptions"]
