"""EventRecorder: what controllers tell operators, as v1.Event objects (`caractrl describe` shows them).

    recorder = EventRecorder(client, component="cara-ttl")
    await recorder.normal(project, "TTLExpired", "TTL 30s expired; deleting")

Guarantees:

* An event names the object it is about (kind, namespace, name, uid, resource_version), has a type (Normal or
  Warning), a CamelCase reason, a message, the recording component (and host), a count and first/last times taken
  from the injected clock. Its name is `<object name>.<16 random hex digits>` (unique within its namespace).
* **Namespace.** An event lives in the namespace of the object it is about (`involved_object.namespace` names it);
  an event about a cluster-wide object (a Node, a NodeGroup) lives in `default` and its `involved_object.namespace`
  is empty.
* **Identical events aggregate.** The same (object, type, reason, message) recorded again within
  `aggregation_window` seconds (default 5 minutes) of the previous one updates that event (count + 1, new last
  time) instead of creating another: a reconcile retried every few seconds leaves one event, not hundreds.
  Updates are compare-and-swap; when the event changed or expired (the server keeps events one hour) a new one
  is created.
* **Recording never fails the caller.** API errors are logged and `None` is returned; only cancellation
  propagates. Events are a best-effort report, not state.
"""

from __future__ import annotations

import collections
import secrets
from dataclasses import dataclass
from typing import Any

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import Clock, SystemClock, timestamp
from caravanserai.errors import ApiError, Conflict, NotFound

log = structlog.get_logger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
DEFAULT_AGGREGATION_WINDOW = 300.0
DEFAULT_MAX_TRACKED = 4096

_Key = tuple[str, str, str, str, str, str]  # kind, key, uid, type, reason, message


@dataclass(slots=True)
class _Recorded:
    event: v1.Event  # as stored by the server (our own copy)
    at: float  # monotonic time it was last recorded


class EventRecorder:
    """Writes v1.Events on behalf of one component. See the module docstring."""

    def __init__(
        self,
        client: Client,
        *,
        component: str,
        host: str = "",
        clock: Clock | None = None,
        aggregation_window: float = DEFAULT_AGGREGATION_WINDOW,
        max_tracked: int = DEFAULT_MAX_TRACKED,
    ) -> None:
        self._events = client.events
        self.component = component
        self.host = host
        self._clock: Clock = clock or SystemClock()
        self._window = aggregation_window
        self._max_tracked = max_tracked
        # The last event written per identical-event key, least recently recorded first (capped LRU).
        self._recent: collections.OrderedDict[_Key, _Recorded] = collections.OrderedDict()

    async def normal(self, obj: Any, reason: str, message: str) -> v1.Event | None:
        return await self.event(obj, NORMAL, reason, message)

    async def warning(self, obj: Any, reason: str, message: str) -> v1.Event | None:
        return await self.event(obj, WARNING, reason, message)

    async def event(self, obj: Any, type_: str, reason: str, message: str) -> v1.Event | None:
        """Record an event about `obj` (any v1 object); returns the stored Event, or None if it could not be
        written (logged)."""
        kind = meta.kind_of(obj).kind
        key: _Key = (kind, meta.key_of(obj), obj.metadata.uid, type_, reason, message)
        try:
            stored = await self._aggregate(key, obj) or await self._create(obj, kind, type_, reason, message)
        except ApiError as exc:
            log.warning("could not record event", kind=kind, name=meta.key_of(obj), reason=reason, error=str(exc))
            return None
        self._remember(key, stored)
        return stored

    async def _aggregate(self, key: _Key, obj: Any) -> v1.Event | None:
        """Count one more occurrence on the recent identical event, if there is one; None otherwise."""
        recent = self._recent.get(key)
        if recent is None or self._clock.monotonic() - recent.at > self._window:
            return None
        updated = meta.copy(recent.event)
        updated.spec.count += 1
        updated.spec.last_timestamp.CopyFrom(timestamp(self._clock.now()))
        updated.spec.involved_object.resource_version = obj.metadata.resource_version
        try:
            return await self._events.update(updated)
        except (Conflict, NotFound):
            self._recent.pop(key, None)
            return None

    async def _create(self, obj: Any, kind: str, type_: str, reason: str, message: str) -> v1.Event:
        now = timestamp(self._clock.now())
        event = meta.with_type_meta(v1.Event())
        event.metadata.name = f"{obj.metadata.name}.{secrets.token_hex(8)}"
        event.metadata.namespace = meta.namespace_of(obj) or meta.DEFAULT_NAMESPACE
        ref = event.spec.involved_object
        ref.kind = kind
        ref.namespace = meta.namespace_of(obj)
        ref.name = obj.metadata.name
        ref.uid = obj.metadata.uid
        ref.resource_version = obj.metadata.resource_version
        event.spec.type = type_
        event.spec.reason = reason
        event.spec.message = message
        event.spec.source.component = self.component
        event.spec.source.host = self.host
        event.spec.count = 1
        event.spec.first_timestamp.CopyFrom(now)
        event.spec.last_timestamp.CopyFrom(now)
        return await self._events.create(event)

    def _remember(self, key: _Key, stored: v1.Event) -> None:
        self._recent[key] = _Recorded(stored, self._clock.monotonic())
        self._recent.move_to_end(key)
        while len(self._recent) > self._max_tracked:
            self._recent.popitem(last=False)


__all__ = ["DEFAULT_AGGREGATION_WINDOW", "EventRecorder", "NORMAL", "WARNING"]
