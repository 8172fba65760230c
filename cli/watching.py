"""What the CLI adds to the library's resumable watch, for `get --watch`, `wait` and `delete --wait`.

The resume protocol (list, watch from the version, resume after Unavailable with jittered backoff, relist on
Expired, reopen a stream silent for `inactivity` seconds) is `caravanserai.client.resumable`. The CLI adds:

* **Which errors are retried**: only Unavailable (apiserver restarting, network blip, stream ended). Anything
  else (Forbidden, a bad selector …) ends the command with its one-line error.
* **Delays**: 0.1–0.3 s doubling to 2.5–7.5 s; no recycling of long watches; the library stays silent (the
  CLI's output is its stdout).
* **A client-side set of names** on top of the server-side selectors.
* **Relists as events**: after Expired the new list is reported as the difference from what was known —
  ADDED for new objects, MODIFIED for changed ones, DELETED for vanished ones.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from caravanserai import v1
from caravanserai.backoff import Backoff
from caravanserai.client import Change, ResourceClient
from caravanserai.client.resumable import Listed, ResumableWatch, WatchOptions, relist_changes
from caravanserai.errors import Unavailable

INACTIVITY = 60.0
BACKOFF = Backoff(initial=0.1, cap=2.5, jitter=2.0, reset_after=None)


@dataclass
class Selection:
    """Which objects are watched: server-side selectors plus an optional client-side set of names."""

    label_selector: str = ""
    field_selector: str = ""
    names: frozenset[str] = frozenset()

    def wants(self, obj: Any) -> bool:
        return not self.names or obj.metadata.name in self.names


@dataclass
class SelectionWatch:
    """A resumable list+watch of one kind. `known` maps names to the last state seen of each selected object.

    Use as `async with SelectionWatch(...) as watcher:`, call `list_current()` first, then iterate `events()`;
    leaving the block (or closing `events()`) ends the watch."""

    resources: ResourceClient[Any]
    selection: Selection = field(default_factory=Selection)
    inactivity: float = INACTIVITY
    known: dict[str, Any] = field(default_factory=dict)
    _items: AsyncGenerator[Listed[Any] | Change[Any], None] | None = None

    def _changes(self) -> AsyncGenerator[Listed[Any] | Change[Any], None]:
        if self._items is None:
            watch: ResumableWatch[Any] = ResumableWatch(
                self.resources,
                label_selector=self.selection.label_selector,
                field_selector=self.selection.field_selector,
                watch_options=WatchOptions(backoff=BACKOFF, idle_timeout=self.inactivity, watch_duration=None),
                retry_on=(Unavailable,),
            )
            self._items = watch.changes()
        return self._items

    async def list_current(self) -> list[Any]:
        """List (retrying while the server is unavailable); returns the selected objects."""
        listed = await anext(self._changes())
        assert isinstance(listed, Listed)  # a resumable watch starts with its list
        items = [o for o in listed.objects if self.selection.wants(o)]
        self.known = {o.metadata.name: o for o in items}
        return items

    async def events(self) -> AsyncGenerator[Change[Any], None]:
        """Every change after the listed version, forever (call `list_current` first). BOOKMARKs are not yielded."""
        async with aclosing(self._changes()) as items:
            async for item in items:
                if isinstance(item, Listed):
                    listed = [o for o in item.objects if self.selection.wants(o)]
                    for change in relist_changes(self.known, listed):
                        self._remember(change)
                        yield change
                elif self.selection.wants(item.object):
                    self._remember(item)
                    yield item

    async def __aenter__(self) -> SelectionWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """End the watch (also when `events()` was never iterated)."""
        if self._items is not None:
            await self._items.aclose()

    def _remember(self, change: Change[Any]) -> None:
        if change.type == v1.DELETED:
            self.known.pop(change.object.metadata.name, None)
        else:
            self.known[change.object.metadata.name] = change.object


__all__ = ["BACKOFF", "INACTIVITY", "Selection", "SelectionWatch"]
