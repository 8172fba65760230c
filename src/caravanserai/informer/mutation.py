"""The cache mutation detector: a test-mode guard that cached objects stay read-only.

Protobuf messages are mutable, and an informer hands the same cached message to every reader, so a reconciler
that edits what it read (instead of `meta.copy` first) silently corrupts every other reader's view, and the
cache no longer matches the server. The detector keeps a serialized copy of every object when it is stored and
compares at check time:

* when the informer replaces or deletes the object (the old object must equal its copy);
* after every event handler call, for the objects the handler was given;
* every second while the informer runs, for all cached objects (a mutation by a reconciler shows up here).

A mismatch logs an error and raises `CacheMutationError`, naming the object and the changed fields; raised in
the informer, it stops the informer (and the process's TaskGroup): loud, as a test wants it.

It is on when `CARA_CACHE_MUTATION_DETECTOR=1` (or true/yes/on) is in the environment, or when asked for by the
constructor flag; off by default, because it doubles the cache's memory and costs a serialization per write.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from typing import Any

import structlog
from google.protobuf import text_format

from caravanserai.errors import CaravanseraiError

log = structlog.get_logger(__name__)

ENV_VAR = "CARA_CACHE_MUTATION_DETECTOR"
_MAX_DIFF_LINES = 20


class CacheMutationError(CaravanseraiError):
    """A cached object was changed in place. Copy objects read from an informer before changing them."""


def enabled_by_environment() -> bool:
    """Whether $CARA_CACHE_MUTATION_DETECTOR asks for the detector."""
    return os.environ.get(ENV_VAR, "").strip().lower() in ("1", "true", "yes", "on")


class MutationDetector:
    """Remembers the serialized form of each cached object; `check` fails when an object no longer matches."""

    def __init__(self, *, enabled: bool | None = None, kind: str = "object") -> None:
        self.enabled = enabled_by_environment() if enabled is None else enabled
        self._kind = kind
        # name → the deterministic serialization of the object stored under it, taken when it was stored.
        self._copies: dict[str, bytes] = {}

    def record(self, name: str, obj: Any) -> None:
        if self.enabled:
            self._copies[name] = obj.SerializeToString(deterministic=True)

    def forget(self, name: str) -> None:
        self._copies.pop(name, None)

    def check(self, name: str, obj: Any) -> None:
        """Raise CacheMutationError if `obj` (stored under `name`) differs from its recorded copy."""
        if not self.enabled:
            return
        recorded = self._copies.get(name)
        if recorded is None or obj.SerializeToString(deterministic=True) == recorded:
            return
        original = type(obj).FromString(recorded)
        diff = difflib.unified_diff(
            text_format.MessageToString(original).splitlines(),
            text_format.MessageToString(obj).splitlines(),
            "cached",
            "now",
            lineterm="",
        )
        shown = "\n".join(list(diff)[2 : 2 + _MAX_DIFF_LINES])
        message = (
            f"cached {self._kind} {name!r} was modified in place; objects from an informer are read-only: "
            f"copy them with caravanserai.meta.copy() before changing them\n{shown}"
        )
        log.error("cache mutation detected", kind=self._kind, name=name, diff=shown)
        raise CacheMutationError(message)

    def check_all(self, items: Mapping[str, Any]) -> None:
        """`check` every object of `items` (name → object)."""
        if self.enabled:
            for name, obj in items.items():
                self.check(name, obj)


__all__ = ["CacheMutationError", "ENV_VAR", "MutationDetector", "enabled_by_environment"]
