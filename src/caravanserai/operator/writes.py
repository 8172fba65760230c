"""Writes the layer makes on the handled object: `client.apply.modify` / `modify_status` (the one read-modify-write
with Conflict retries), starting from the object in hand.

Guarantees: a write is recomputed on the object as it is now (never on a stale copy), at most
`client.apply.CONFLICT_RETRIES` times; a missing object ends it quietly (None). The status goes through the status
subresource (`update_status`), so it never overwrites a spec or metadata change made meanwhile, and is written only
when it differs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from caravanserai import meta
from caravanserai.client import apply
from caravanserai.errors import NotFound


async def modify(resource: Any, obj: Any, change: Callable[[Any], bool]) -> Any | None:
    """Apply `change` (returns False when there is nothing to do) to `obj` and Update it; on Conflict read it
    again and repeat. Returns the stored object (or `obj` when nothing was to do), None when it is gone."""
    try:
        stored, _ = await apply.modify(resource, meta.key_of(obj), change, current=obj)
    except NotFound:
        return None
    return stored


async def write_status(resource: Any, obj: Any, status: Any) -> Any | None:
    """Store `status` as the status of `obj` unless it is already; Conflict → read again, write again."""

    def put(fresh: Any) -> bool:
        if fresh.status == status:
            return False
        fresh.status.CopyFrom(status)
        return True

    try:
        stored, _ = await apply.modify_status(resource, meta.key_of(obj), put, current=obj)
    except NotFound:
        return None
    return stored
