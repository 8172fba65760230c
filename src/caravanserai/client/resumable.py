"""The resumable watch: list, then watch from the list's version, forever. The one copy of the resume protocol.

    watch = ResumableWatch(client.projects, field_selector="status.nodeRef=node-1")
    async with contextlib.aclosing(watch.changes()) as changes:
        async for item in changes:
            if isinstance(item, Listed): ...   # replace what you knew with item.objects
            else: ...                          # one Change: ADDED, MODIFIED or DELETED

The informer's reflector and the CLI (`get --watch`, `wait`, `delete --wait`) consume it. A watch that silently
dies is the most common failure of Python Kubernetes clients (kopf, kubernetes-asyncio, lightkube); this one never
does:

1. **List.** Read every matching object, in pages of `page_size` that all come from one snapshot, and yield them
   as one `Listed` with the snapshot's version. The consumer *replaces* what it knew: objects absent now were
   deleted meanwhile (`relist_changes` turns the difference into changes for consumers that keep a name map).
2. **Watch from that version.** Changes are yielded in order. The version advances with every change *and* every
   BOOKMARK (which is not yielded), once the consumer has taken the change: it always means "everything up to
   here was handed over".
3. **A broken stream resumes where it stopped.** A retryable error (`retry_on`: anything for the reflector,
   Unavailable for the CLI) ends the stream: wait a jittered backoff (`caravanserai.backoff`; reset by every
   list and every change or bookmark) — or, when the channel lost its connection, only until it is connected
   again (then the backoff starts over) — and watch again from the last version. No relist, nothing missed,
   nothing twice. Errors that are not retryable are raised to the consumer.
4. **An expired version relists.** `Expired` (the server's history no longer reaches back to our version: it was
   compacted while we were away, or the server restarted with a short window) is normal: go to step 1 at once.
   A second Expired in a row backs off first.
5. **Silence means death.** A watch that delivers neither a change nor a bookmark for `idle_timeout` seconds
   (60: six of the apiserver's 10 s bookmark intervals) is presumed dead (a half-open connection, a stuck proxy)
   and restarted from the last version after a backoff. Time the consumer spends before asking for the next
   change (back-pressure) is not silence.
6. **Watches are recycled.** With `watch_duration`, each watch ends after a random time in that range and starts
   again from the last version at once, spreading watchers across the apiservers behind one address.
7. **A failing list is retried** with the same backoff. The generator ends only when the consumer leaves it
   (close it: `contextlib.aclosing`) or a non-retryable error is raised.

The knobs (`backoff`, `idle_timeout`, `watch_duration`, `page_size`) are one `WatchOptions` record, handed down
whole by the Manager, the informer factory, the informer and the reflector. Every wait before a retry goes through
`ResumableWatch.pause`, the one place that decides how a retry waits. Time is the injected clock's: idle and
recycle deadlines and backoff sleeps use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from caravanserai import v1
from caravanserai.backoff import Backoff
from caravanserai.client.client import Change, ResourceClient
from caravanserai.clock import Clock, SystemClock
from caravanserai.errors import Expired, Unavailable

T = TypeVar("T")

DEFAULT_IDLE_TIMEOUT = 60.0
DEFAULT_PAGE_SIZE = 500
DEFAULT_WATCH_DURATION = (300.0, 600.0)


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """How a resumable watch retries, presumes silence dead, recycles and pages (steps 3 to 7 and 1 of the module
    docstring). One record from the Manager down to the watch; the defaults are the informers' (client-go's)."""

    backoff: Backoff = Backoff()  # the wait before each retry (reset by every list, change or bookmark)
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT  # seconds without a change or bookmark that mean a dead watch
    watch_duration: tuple[float, float] | None = DEFAULT_WATCH_DURATION  # each watch's random lifetime; None: none
    page_size: int = DEFAULT_PAGE_SIZE  # objects per page of a list


@dataclass(frozen=True, slots=True)
class Listed(Generic[T]):
    """A complete list: every selected object, read at `resource_version`. The first item of every resumable
    watch, and again after each relist; the consumer replaces what it knew with it."""

    objects: list[T]
    resource_version: str


class WatchIdle(Unavailable):
    """No change and no bookmark arrived for the idle timeout: the stream is presumed dead."""


class _Recycle(Exception):
    """The watch reached its planned lifetime (not an error)."""


class _StreamEnded(Exception):
    """The server ended the stream without an error."""


def relist_changes(known: Mapping[str, Any], listed: Sequence[Any]) -> list[Change[Any]]:
    """What a relist means to a consumer that knew `known` (name → object): ADDED for new objects, MODIFIED for
    changed ones (other resource_version), DELETED (with the last known state) for vanished ones."""
    changes: list[Change[Any]] = []
    names = set()
    for obj in listed:
        names.add(obj.metadata.name)
        old = known.get(obj.metadata.name)
        if old is None:
            changes.append(Change(v1.ADDED, obj))
        elif old.metadata.resource_version != obj.metadata.resource_version:
            changes.append(Change(v1.MODIFIED, obj))
    changes += [Change(v1.DELETED, old) for name, old in known.items() if name not in names]
    return changes


class ResumableWatch(Generic[T]):
    """List and watch one kind (with optional selectors) following the module's protocol; `changes()` yields."""

    def __init__(
        self,
        resources: ResourceClient[Any],
        *,
        label_selector: str = "",
        field_selector: str = "",
        clock: Clock | None = None,
        watch_options: WatchOptions = WatchOptions(),
        retry_on: tuple[type[Exception], ...] = (Exception,),
        logger: Any = None,
    ) -> None:
        self._resources = resources
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._clock: Clock = clock or SystemClock()
        self._backoff = watch_options.backoff.start(self._clock)
        self._idle_timeout = watch_options.idle_timeout
        self._watch_duration = watch_options.watch_duration
        self._page_size = watch_options.page_size
        self._retry_on = retry_on
        self._log = logger  # a structlog logger, or None to stay silent (the CLI's stdout is its output)
        # Everything up to this version was handed to the consumer ("" before the first list).
        self.resource_version = ""
        self.lists = 0  # completed lists (the first one and every relist)
        self.watches = 0  # watches started
        self.events = 0  # changes and bookmarks received
        # Why the last list or watch failed, while it has not succeeded since (None once a list completes or a change
        # or bookmark arrives): what a readiness check reports.
        self.failure: str | None = None
        # Of the current watch: monotonic time of the last change or bookmark, whether the reader waits for the
        # consumer (held: not silence), and why the watchdog stopped it.
        self._last_seen = 0.0
        self._held = False
        self._interrupt: Exception | None = None

    async def changes(self) -> AsyncGenerator[Listed[T] | Change[Any], None]:
        """`Listed`, then every change after it, resuming and relisting as the module docstring says."""
        need_list, expired_before = True, False
        while True:
            delay = 0.0
            try:
                if need_list:  # step 1: first time, or after Expired
                    listed = await self._list()
                    need_list = False
                    yield listed
                    self.resource_version = listed.resource_version
                    del listed  # the consumer has the objects; a compact cache must not pay for them while we watch
                async with contextlib.aclosing(self._watch()) as stream:  # steps 2 and 6
                    async for change in stream:
                        yield change
                expired_before = False
            except Expired as exc:  # step 4: relist at once; a second Expired in a row first backs off
                self._note("info", "watch version expired; relisting", version=self.resource_version, error=str(exc))
                need_list = True
                delay = self._backoff.next_delay() if expired_before else 0.0
                expired_before = True
            except _StreamEnded:  # resume from the version, backing off against hot loops
                delay = self._backoff.next_delay()
                self._note("info", "watch ended by the server; resuming", retry_in=round(delay, 3))
            except WatchIdle as exc:  # step 5
                delay = self._backoff.next_delay()
                self._note("warning", "watch idle; restarting", error=str(exc), retry_in=round(delay, 3))
            except self._retry_on as exc:  # steps 3 and 7
                delay = self._backoff.next_delay()
                self.failure = f"{type(exc).__name__}: {exc}"
                self._note(
                    "warning",
                    "list/watch failed; retrying",
                    listing=need_list,
                    version=self.resource_version,
                    error=f"{type(exc).__name__}: {exc}",
                    retry_in=round(delay, 3),
                )
            if delay > 0:
                await self.pause(delay)

    async def pause(self, delay: float) -> None:
        """Wait before the next attempt. Every retry of the loop waits here.

        `delay` seconds of the clock while the channel stays connected (the server answered with an error: back
        off); when the channel has lost its connection, only until it is ready again (`Client.retry_pause`), and
        the backoff then starts again from its first delay: the failures were the outage, not the server."""
        if await self._resources.client.retry_pause(delay, clock=self._clock):
            self._backoff.reset()

    async def _list(self) -> Listed[T]:
        items: list[Any] = []
        token = ""
        while True:
            page = await self._resources.list(
                label_selector=self._label_selector,
                field_selector=self._field_selector,
                limit=self._page_size,
                continue_token=token,
            )
            # Each item is re-decoded on its own: a message from a page shares the page's memory, which would
            # then live as long as any one of its objects is kept.
            items.extend(type(obj).FromString(obj.SerializeToString()) for obj in page.items)
            if not page.continue_token:
                break
            token = page.continue_token
        self.lists += 1
        self.failure = None
        self._backoff.reset()
        return Listed(items, page.resource_version)

    async def _watch(self) -> AsyncGenerator[Change[Any], None]:
        """One watch from `resource_version`: its changes, until it fails, ends or falls silent (raises) or is
        recycled (returns). A reader task receives; a watchdog task interrupts it at the idle or recycle deadline."""
        self.watches += 1
        self._last_seen, self._held, self._interrupt = self._clock.monotonic(), False, None
        lifetime = random.uniform(*self._watch_duration) if self._watch_duration else float("inf")
        queue: asyncio.Queue[Change[Any] | Exception] = asyncio.Queue(maxsize=1)
        reader = asyncio.create_task(self._read(queue), name=f"watch-{self._resources.resource}")
        watchdog = asyncio.create_task(self._watchdog(reader, self._last_seen + lifetime))
        try:
            while True:
                item = await queue.get()
                if isinstance(item, _Recycle):
                    return
                if isinstance(item, Exception):
                    raise item
                self.events += 1
                self.failure = None
                self._backoff.reset()
                if item.type != v1.BOOKMARK:
                    yield item
                obj: Any = item.object
                self.resource_version = obj.metadata.resource_version or self.resource_version
        finally:
            self._interrupt = None  # a reader cancelled from here on stops without reporting
            for task in (reader, watchdog):
                task.cancel()
            await asyncio.gather(reader, watchdog, return_exceptions=True)

    async def _read(self, queue: asyncio.Queue[Change[Any] | Exception]) -> None:
        """Receive the stream into `queue` (one item ahead of the consumer); then its end, error or interrupt."""
        stream = self._resources.watch(
            resource_version=self.resource_version,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            allow_bookmarks=True,
        )
        try:
            async for change in stream:
                self._last_seen = self._clock.monotonic()
                if queue.full():
                    self._held = True
                    try:
                        await queue.put(change)
                    finally:
                        self._held = False
                        self._last_seen = self._clock.monotonic()
                else:
                    queue.put_nowait(change)
            outcome: Exception = _StreamEnded()
        except asyncio.CancelledError:
            if self._interrupt is None:
                raise  # the watch is being closed
            outcome = self._interrupt
        except Exception as exc:  # noqa: BLE001 - handed to the loop, which decides
            outcome = exc
        finally:
            await stream.aclose()  # type: ignore[attr-defined]  # Resources.watch is an async generator, typed as the AsyncIterator it is
        await queue.put(outcome)

    async def _watchdog(self, reader: asyncio.Task[None], recycle_at: float) -> None:
        while True:
            now = self._clock.monotonic()
            if now >= recycle_at:
                self._interrupt = _Recycle()
                break
            idle_deadline = (now if self._held else self._last_seen) + self._idle_timeout
            if now >= idle_deadline:
                self._interrupt = WatchIdle(f"no event or bookmark for {self._idle_timeout:g}s")
                break
            await self._clock.sleep(min(recycle_at, idle_deadline) - now)
        reader.cancel()

    def _note(self, level: str, message: str, **fields: Any) -> None:
        if self._log is not None:
            getattr(self._log, level)(message, **fields)


__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_WATCH_DURATION",
    "Listed",
    "ResumableWatch",
    "WatchIdle",
    "WatchOptions",
    "relist_changes",
]
