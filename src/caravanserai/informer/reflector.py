"""The Reflector keeps a cache in step with the API: list, then watch, forever.

The resume protocol. A watch that silently dies is the most common failure of Python Kubernetes clients (kopf,
kubernetes-asyncio, lightkube); this one never does:

1. **List.** Read every matching object, in pages of `page_size` that all come from one snapshot, and remember
   the snapshot's resource_version. The sink *replaces* its contents with the result: objects it held that are
   absent now are delivered as deletions (their last known state), changed ones as updates, new ones as adds.
2. **Watch from that version.** Events are applied in order. The version advances with every event *and* every
   BOOKMARK, so it always means "everything up to here is applied".
3. **A broken stream resumes where it stopped.** Unavailable, or any other error, ends the stream: wait a
   jittered exponential backoff (0.8 s · 2ⁿ capped at 30 s, each delay stretched by up to 100 % at random,
   reset after 2 minutes without failure: client-go's numbers), then watch again from the last version. No
   relist, nothing missed, nothing twice.
4. **An expired version relists.** `Expired` (the server's history no longer reaches back to our version: it was
   compacted while we were away, or the server restarted with a short window) is normal: go to step 1 at once.
   Deletions missed meanwhile surface from the list's diff. A second Expired in a row backs off first.
5. **Silence means death.** A watch that delivers neither an event nor a bookmark for `watch_idle_timeout`
   (60 s: six of the apiserver's 10 s bookmark intervals) is presumed dead (a half-open connection, a stuck
   proxy) and restarted from the last version, after a backoff.
6. **Watches are recycled.** Each watch ends after a random 5 to 10 minutes and starts again from the last
   version at once, spreading watchers across the apiservers behind one address.
7. **A failing list is retried** with the same backoff. `run()` returns only when cancelled.

The sink applies events synchronously (cache writes never wait for handlers); when its consumers fall behind,
`wait_for_room()` holds the stream back, which counts as activity, not silence.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar

import structlog

from caravanserai import v1
from caravanserai.backoff import Backoff
from caravanserai.client import ResourceClient
from caravanserai.clock import Clock, SystemClock
from caravanserai.errors import Expired, Unavailable
from caravanserai.informer.mutation import CacheMutationError

log = structlog.get_logger(__name__)

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

DEFAULT_WATCH_IDLE_TIMEOUT = 60.0
DEFAULT_PAGE_SIZE = 500
DEFAULT_WATCH_DURATION = (300.0, 600.0)


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


class WatchIdle(Unavailable):
    """No event and no bookmark arrived for the idle timeout: the stream is presumed dead."""


class _Recycle(Exception):
    """The watch reached its planned lifetime (not an error)."""


class _StreamEnded(Exception):
    """The server ended the stream without an error."""


class Reflector(Generic[T]):
    """Lists and watches one kind (with optional selectors) into a `Sink`, following the module's protocol."""

    def __init__(
        self,
        client: ResourceClient[Any],
        sink: Sink[T],
        *,
        label_selector: str = "",
        field_selector: str = "",
        clock: Clock | None = None,
        watch_idle_timeout: float = DEFAULT_WATCH_IDLE_TIMEOUT,
        watch_duration: tuple[float, float] = DEFAULT_WATCH_DURATION,
        backoff: Backoff = Backoff(),
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> None:
        self._client = client
        self._sink = sink
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._clock: Clock = clock or SystemClock()
        self._idle_timeout = watch_idle_timeout
        self._watch_duration = watch_duration
        self._backoff = backoff.start(self._clock)
        self._page_size = page_size
        # Everything up to this version has been handed to the sink ("" before the first list).
        self.resource_version = ""
        # Monotonic time of the last event or bookmark of the current watch; `_held` while the sink is full.
        self._last_seen = 0.0
        self._held = False
        self.lists = 0  # completed lists (the first one and every relist)
        self.watches = 0  # watches started
        self.events = 0  # events and bookmarks received
        self._log = log.bind(resource=client.resource, labels=label_selector, fields=field_selector)

    async def run(self) -> None:
        """List and watch until cancelled. Never returns otherwise; errors are logged and retried."""
        need_list = True
        expired_before = False
        while True:
            delay = 0.0
            try:
                # Step 1: list when we have no version to resume from (first time, or after Expired).
                if need_list:
                    await self._list_and_replace()
                    need_list = False
                # Steps 2 and 6: watch from the version; a recycled watch just starts again.
                await self._watch()
                expired_before = False
            except Expired as exc:
                # Step 4: relist at once; a second Expired in a row first backs off.
                self._log.info("watch version expired; relisting", version=self.resource_version, error=str(exc))
                need_list = True
                delay = self._backoff.next_delay() if expired_before else 0.0
                expired_before = True
            except WatchIdle as exc:
                # Step 5: a silent stream is dead; resume from the version after a backoff.
                delay = self._backoff.next_delay()
                self._log.warning("watch idle; restarting", error=str(exc), retry_in=round(delay, 3))
            except _StreamEnded:
                # The server ended the stream cleanly: resume from the version, backing off against hot loops.
                delay = self._backoff.next_delay()
                self._log.info("watch ended by the server; resuming", retry_in=round(delay, 3))
            except CacheMutationError:
                raise  # a bug in a reader of the cache: fail loudly, never retry
            except Exception as exc:  # noqa: BLE001 - step 3/7: any failure backs off and resumes
                delay = self._backoff.next_delay()
                self._log.warning(
                    "list/watch failed; retrying",
                    listing=need_list,
                    version=self.resource_version,
                    error=f"{type(exc).__name__}: {exc}",
                    retry_in=round(delay, 3),
                )
            if delay > 0:
                await self._clock.sleep(delay)

    async def _list_and_replace(self) -> None:
        items: list[T] = []
        token = ""
        while True:
            page = await self._client.list(
                label_selector=self._label_selector,
                field_selector=self._field_selector,
                limit=self._page_size,
                continue_token=token,
            )
            # Each item is re-decoded on its own: a message from a page shares the page's memory, which would
            # then live as long as any one of its objects stays cached.
            items.extend(type(obj).FromString(obj.SerializeToString()) for obj in page.items)
            if not page.continue_token:
                break
            token = page.continue_token
        self._sink.replace(items, page.resource_version)
        self.resource_version = page.resource_version
        self.lists += 1
        self._log.debug("listed", objects=len(items), version=self.resource_version)

    async def _watch(self) -> None:
        """One watch from `resource_version`, until it fails (raises) or is recycled (returns)."""
        self.watches += 1
        self._last_seen = self._clock.monotonic()
        lifetime = random.uniform(*self._watch_duration)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._consume(), name=f"reflector-watch-{self._client.resource}")
                group.create_task(self._watchdog(self._last_seen + lifetime))
        except BaseExceptionGroup as failed:
            first = failed.exceptions[0]
            if isinstance(first, _Recycle):
                return
            raise first from None

    async def _consume(self) -> None:
        stream = self._client.watch(
            resource_version=self.resource_version,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            allow_bookmarks=True,
        )
        try:
            async for event in stream:
                self._last_seen = self._clock.monotonic()
                self.events += 1
                if event.type != v1.BOOKMARK:
                    self._sink.apply(event.type, event.object)
                self.resource_version = event.object.metadata.resource_version or self.resource_version
                if self._sink.full():
                    self._held = True
                    try:
                        await self._sink.wait_for_room()
                    finally:
                        self._held = False
                        self._last_seen = self._clock.monotonic()
        finally:
            # the client's watch is an async generator; the AsyncIterator it is typed as declares no aclose.
            await stream.aclose()  # type: ignore[attr-defined]
        raise _StreamEnded()

    async def _watchdog(self, recycle_at: float) -> None:
        while True:
            now = self._clock.monotonic()
            if now >= recycle_at:
                raise _Recycle()
            idle_deadline = (now if self._held else self._last_seen) + self._idle_timeout
            if now >= idle_deadline:
                raise WatchIdle(f"no event or bookmark for {self._idle_timeout:g}s")
            await self._clock.sleep(min(recycle_at, idle_deadline) - now)


__all__ = [
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_WATCH_DURATION",
    "DEFAULT_WATCH_IDLE_TIMEOUT",
    "Reflector",
    "Sink",
    "WatchIdle",
]
