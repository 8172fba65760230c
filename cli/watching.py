"""A watch that survives the apiserver going away: list, then watch from the listed version, and resume.

The resume protocol, as `get --watch`, `wait` and `delete --wait` use it:

* **List, remember the version, watch from it.** Every event (BOOKMARKs included) advances the version.
* **Unavailable** (apiserver restarting, network blip, stream ended): back off with jitter (0.2 s doubling to 5 s)
  and watch again from the last version seen. Nothing is missed and nothing is repeated: the server replays
  every change after that version.
* **Expired** (the version was compacted away): list again and report the difference from what was known as
  synthetic events — ADDED for new objects, MODIFIED for changed ones, DELETED for vanished ones — then watch
  from the new list's version.
* **Silence**: a stream with no event (not even a bookmark) for `inactivity` seconds is presumed dead and
  reopened from the last version.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, cast

from caravanserai import v1
from caravanserai.client import Change, ObjectList, ResourceClient
from caravanserai.errors import Expired, Unavailable

INACTIVITY = 60.0
_FIRST_DELAY = 0.2
_MAX_DELAY = 5.0


@dataclass
class Selection:
    """Which objects are watched: server-side selectors plus an optional client-side set of names."""

    label_selector: str = ""
    field_selector: str = ""
    names: frozenset[str] = frozenset()

    def wants(self, obj: Any) -> bool:
        return not self.names or obj.metadata.name in self.names


@dataclass
class Backoff:
    """Jittered exponential delays between reconnection attempts; `reset` after a success."""

    delay: float = _FIRST_DELAY

    async def wait(self) -> None:
        await asyncio.sleep(self.delay * (0.5 + random.random()))
        self.delay = min(self.delay * 2, _MAX_DELAY)

    def reset(self) -> None:
        self.delay = _FIRST_DELAY


@dataclass
class Watcher:
    """A resumable list+watch of one kind. `known` maps names to the last state seen of each selected object."""

    resources: ResourceClient[Any]
    selection: Selection = field(default_factory=Selection)
    inactivity: float = INACTIVITY
    version: str = ""
    known: dict[str, Any] = field(default_factory=dict)
    _backoff: Backoff = field(default_factory=Backoff)

    async def list_current(self) -> list[Any]:
        """List (retrying while the server is unavailable), remember the version; returns the selected objects."""
        page = await self._list_retrying()
        self.version = page.resource_version
        items = [o for o in page.items if self.selection.wants(o)]
        self.known = {o.metadata.name: o for o in items}
        return items

    async def _list_retrying(self) -> ObjectList[Any]:
        while True:
            try:
                page = await self.resources.list(
                    label_selector=self.selection.label_selector, field_selector=self.selection.field_selector
                )
            except Unavailable:
                await self._backoff.wait()
                continue
            self._backoff.reset()
            return page

    async def events(self) -> AsyncGenerator[Change[Any], None]:
        """Every change after the listed version, forever (call `list_current` first). BOOKMARKs are not yielded."""
        while True:
            try:
                async for event in self._stream():
                    yield event
                raise Unavailable("watch stream ended")
            except Unavailable:
                await self._backoff.wait()
            except Expired:
                for event in await self._relist():
                    yield event

    async def _stream(self) -> AsyncGenerator[Change[Any], None]:
        """One watch stream from `version`, ended by the server or by `inactivity` seconds of silence."""
        stream = cast(AsyncGenerator[Change[Any], None], self.resources.watch(
            resource_version=self.version,
            label_selector=self.selection.label_selector,
            field_selector=self.selection.field_selector,
        ))
        try:
            while True:
                try:
                    event = await asyncio.wait_for(anext(stream), self.inactivity)
                except (StopAsyncIteration, TimeoutError):
                    return
                self._backoff.reset()
                self.version = event.object.metadata.resource_version or self.version
                if event.type == v1.BOOKMARK or not self.selection.wants(event.object):
                    continue
                self._remember(event)
                yield event
        finally:
            await stream.aclose()

    def _remember(self, event: Change[Any]) -> None:
        if event.type == v1.DELETED:
            self.known.pop(event.object.metadata.name, None)
        else:
            self.known[event.object.metadata.name] = event.object

    async def _relist(self) -> list[Change[Any]]:
        """After Expired: list again and turn the difference from `known` into events."""
        before = self.known
        items = await self.list_current()
        events = []
        for obj in items:
            old = before.get(obj.metadata.name)
            if old is None:
                events.append(Change(v1.ADDED, obj))
            elif old.metadata.resource_version != obj.metadata.resource_version:
                events.append(Change(v1.MODIFIED, obj))
        events += [Change(v1.DELETED, old) for name, old in before.items() if name not in self.known]
        return events


__all__ = ["INACTIVITY", "Backoff", "Selection", "Watcher"]
