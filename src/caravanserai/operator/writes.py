"""Writes the layer makes on the handled object, each retried on Conflict with a fresh read.

Guarantees: a write is recomputed on the object as it is now (never on a stale copy), at most `ATTEMPTS` times;
a missing object ends it quietly (None). The status goes through the status subresource (`update_status`), so
it never overwrites a spec or metadata change made meanwhile, and is written only when it differs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from caravanserai import meta
from caravanserai.errors import Conflict, NotFound

ATTEMPTS = 5


async def modify(resource: Any, obj: Any, change: Callable[[Any], bool]) -> Any | None:
    """Apply `change` (returns False when there is nothing to do) to `obj` and Update it; on Conflict read it
    again and repeat. Returns the stored object (or `obj` when nothing was to do), None when it is gone."""
    current = obj
    for attempt in range(1, ATTEMPTS + 1):
        fresh = meta.copy(current)
        if not change(fresh):
            return current
        try:
            return await resource.update(fresh)
        except NotFound:
            return None
        except Conflict:
            if attempt == ATTEMPTS:
                raise
        try:
            current = await resource.get(obj.metadata.name)
        except NotFound:
            return None
    return None  # unreachable: the last attempt returns or raises


async def write_status(resource: Any, obj: Any, status: Any) -> Any | None:
    """Store `status` as the status of `obj` unless it is already; Conflict → read again, write again."""
    current = obj
    for attempt in range(1, ATTEMPTS + 1):
        if current.status == status:
            return current
        fresh = meta.copy(current)
        fresh.status.CopyFrom(status)
        try:
            return await resource.update_status(fresh)
        except NotFound:
            return None
        except Conflict:
            if attempt == ATTEMPTS:
                raise
        try:
            current = await resource.get(obj.metadata.name)
        except NotFound:
            return None
    return None


__all__ = ["ATTEMPTS", "modify", "write_status"]
