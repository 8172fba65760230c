"""The generic object store: named opaque values per resource, in etcd, written only by compare-and-swap.

Layout: the object of key `key` of resource `resource` (a plural such as `projects`) lives at the etcd key
`<prefix>/<resource>/<key>`; its value is whatever bytes the apiserver stored (serialized protobuf). A key is the
object's name, or "<namespace>/<name>" for an object of a namespaced kind, so one namespace's objects are one
range of keys (`list(..., namespace=...)`). An object's `mod_revision` is its resource_version.

Guarantees:

- **No blind writes.** Every write is one etcd transaction guarded by a comparison: create requires
  `create_revision == 0` (AlreadyExists otherwise), update and delete require `mod_revision == expected`
  (Conflict when stale, NotFound when absent). A caller that gets Conflict reads again and decides again.
- **Consistent reads.** `get` and `list` are linearizable. `list(..., revision=R)` reads the snapshot at R, so
  paging with the first page's revision yields one consistent snapshot however many writes happen meanwhile;
  Expired once R is compacted.
- **Watch from a list.** `watch(resource, start_revision=page.revision + 1)` delivers every later change
  exactly once, in revision order, across etcd restarts; Expired when history since then is compacted (list
  again). Empty batches are progress notifications: nothing at or below their revision is still to come.
- **Encryption at rest** (optional, `encryption.Encryption`): values of the resources it names are sealed on
  create and update and opened on every read and watch event; callers see plaintext either way.
- **Errors** are `caravanserai.errors` types only (NotFound, AlreadyExists, Conflict, Expired, Unavailable, …).
  A write that fails with Unavailable may or may not have been applied; it is never retried here.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from caravanserai.errors import AlreadyExists, Conflict, Expired, Invalid, NotFound
from caravanserai.storage.encryption import Encryption
from caravanserai.storage.etcd import EtcdClient
from caravanserai.storage.etcd_types import (
    Compare,
    DeleteOp,
    DeleteResult,
    Event,
    KeyValue,
    Op,
    PutOp,
    RangeOp,
    RangeResult,
    TxnResult,
    prefix_end,
)


@dataclass(frozen=True, slots=True)
class StoredObject:
    """An object as stored: its key (`name`), its value, the revisions of its last write and of its creation, and
    the etcd lease it is bound to (0: none)."""

    name: str
    value: bytes
    mod_revision: int
    create_revision: int
    lease: int = 0


@dataclass(frozen=True, slots=True)
class StoreEvent:
    """One change to one object. For DELETE, `value` is empty, `mod_revision` is the deleting revision and
    `create_revision` that of the deleted object. `prev_value` is the value before the change (empty for a
    creation, or when etcd no longer holds it)."""

    type: Literal["PUT", "DELETE"]
    name: str
    value: bytes
    prev_value: bytes
    mod_revision: int
    create_revision: int


@dataclass(frozen=True, slots=True)
class WatchBatch:
    """Changes up to and including `revision`, in order. Empty `events` = a progress notification."""

    revision: int
    events: list[StoreEvent]


@dataclass(frozen=True, slots=True)
class ListPage:
    """Objects in name order, read at `revision`. When `more`, ask for the next page with
    `start_after=items[-1].name, revision=revision`."""

    items: list[StoredObject]
    revision: int
    more: bool


AlsoGuard = Literal["equal", "quiet"]


@dataclass(frozen=True, slots=True)
class Also:
    """Another object written in the same transaction as a create, update or delete: `value` replaces the object
    at `key` of `resource`, which must still be at `expected_revision` (how a quota's usage is counted with the
    write that changes it). With `value` None the object is only compared, not written (`unchanged`): the
    transaction holds only while it is still at that revision (how a write that borrows from a cohort is guarded
    on every member quota it read). A `quiet` guard compares every object under a key prefix instead.

    `settled`, when set, is called once after the transaction: with its revision when it was applied, with None
    when it was not or when its outcome is unknown (how a caller keeps what it learned from its own writes)."""

    resource: str
    key: str
    value: bytes | None
    expected_revision: int
    guard: AlsoGuard = "equal"
    settled: Callable[[int | None], None] | None = field(default=None, compare=False)

    @classmethod
    def unchanged(cls, resource: str, key: str, expected_revision: int) -> Also:
        """A compare-only companion: the object must still be at `expected_revision`; it is not written."""
        return cls(resource, key, None, expected_revision)

    @classmethod
    def quiet(
        cls, resource: str, prefix: str, since: int, *, settled: Callable[[int | None], None] | None = None
    ) -> Also:
        """A compare-only companion over every object of `resource` whose key starts with `prefix` (a namespace's
        "team-a/"): none was created or written after revision `since`. An object removed since does not fail
        it: guard the objects read with `unchanged` too."""
        return cls(resource, prefix, None, since, "quiet", settled)

    def changed(self, found: RangeResult) -> int | None:
        """The revision that fails this guard in `found` (the failure branch's read of it), None if it holds."""
        if self.guard == "quiet":
            latest = max((kv.mod_revision for kv in found.kvs), default=0)
            return latest if latest > self.expected_revision else None
        current = found.kvs[0].mod_revision if found.kvs else 0
        return current if current != self.expected_revision else None


class CompanionChanged(Conflict):
    """An `Also` object changed since it was read: nothing was written; read it again and decide again (never the
    caller's conflict)."""


def _check_segment(what: str, value: str) -> None:
    if not value or "/" in value or value in (".", ".."):
        raise Invalid(f"invalid {what} {value!r}: must be non-empty and contain no '/'")


def _check_key(key: str) -> None:
    """A key is a name or "namespace/name", each part a segment."""
    namespace, slash, name = key.partition("/")
    if slash:
        _check_segment("namespace", namespace)
    _check_segment("name", name if slash else namespace)


class Store:
    """Objects of every resource under one key prefix; see the module docstring for the guarantees."""

    def __init__(
        self, client: EtcdClient, prefix: str = "/caravanserai", *, encryption: Encryption | None = None
    ) -> None:
        if not prefix.startswith("/"):
            raise ValueError(f"store prefix must start with '/': {prefix!r}")
        self._client = client
        self._prefix = prefix.rstrip("/")
        self._encryption = encryption

    def _seal(self, resource: str, name: str, value: bytes) -> bytes:
        return value if self._encryption is None else self._encryption.seal(resource, name, value)

    def _open(self, resource: str, name: str, value: bytes) -> bytes:
        return value if self._encryption is None or not value else self._encryption.open(resource, name, value)

    def _dir(self, resource: str) -> bytes:
        _check_segment("resource", resource)
        return f"{self._prefix}/{resource}/".encode()

    def _key(self, resource: str, name: str) -> bytes:
        _check_key(name)
        return self._dir(resource) + name.encode()

    def _object(self, resource: str, kv: KeyValue, dir_len: int) -> StoredObject:
        name = kv.key[dir_len:].decode()
        value = self._open(resource, name, kv.value)
        return StoredObject(name, value, kv.mod_revision, kv.create_revision, kv.lease)

    async def get(self, resource: str, name: str) -> StoredObject:
        """The object now (linearizable read). NotFound when absent."""
        directory = self._dir(resource)
        result = await self._client.range(self._key(resource, name))
        if not result.kvs:
            raise NotFound(f"{resource} {name!r} not found")
        return self._object(resource, result.kvs[0], len(directory))

    async def list(
        self, resource: str, *, limit: int = 0, start_after: str = "", revision: int = 0, namespace: str = ""
    ) -> ListPage:
        """Objects in key order after the key `start_after`, at most `limit` (0: all), read at `revision` (0: now);
        only those of `namespace` when given (a namespaced resource).

        The page's `revision` is the snapshot it was read at: pass it back for the next page to keep paging
        one snapshot, and use `revision + 1` as a watch's start. Expired when `revision` is compacted.
        """
        directory = self._dir(resource)
        scope = directory
        if namespace:
            _check_segment("namespace", namespace)
            scope = directory + namespace.encode() + b"/"
        start = directory + start_after.encode() + b"\0" if start_after else scope
        result = await self._client.range(max(start, scope), prefix_end(scope), limit=limit, revision=revision)
        items = [self._object(resource, kv, len(directory)) for kv in result.kvs]
        return ListPage(items, revision or result.revision, result.more)

    async def pages(
        self, resource: str, *, start_after: str = "", revision: int = 0, page_size: int = 1000, namespace: str = ""
    ) -> AsyncGenerator[ListPage, None]:
        """Every object after `start_after` (of `namespace` when given), page by page, all read at one snapshot
        (the first page's revision, or `revision` when given). The caller may stop early; each page's `revision`
        is the snapshot's."""
        while True:
            page = await self.list(
                resource, limit=page_size, start_after=start_after, revision=revision, namespace=namespace
            )
            revision = page.revision
            yield page
            if not page.more or not page.items:
                return
            start_after = page.items[-1].name

    async def create(self, resource: str, name: str, value: bytes, *, lease: int = 0, also: Sequence[Also] = ()) -> int:
        """Store a new object (bound to `lease` when non-zero), and the `also` objects with it; its mod_revision.
        AlreadyExists if taken; CompanionChanged (nothing written) when an `also` object changed."""
        key = self._key(resource, name)
        result = await self._txn(
            [Compare.create_revision(key, "==", 0), *self._also_compare(also)],
            [PutOp(key, self._seal(resource, name, value), lease=lease), *self._also_put(also)],
            [RangeOp(key, keys_only=True), *self._also_read(also)],
            also,
        )
        if not result.succeeded:
            current = result.responses[0]
            assert isinstance(current, RangeResult)
            if current.kvs:
                raise AlreadyExists(f"{resource} {name!r} already exists")
            self._raise_companion_changed(result, also, first=1)
        return result.revision

    def _also_compare(self, also: Sequence[Also]) -> builtins.list[Compare]:
        return [self._also_guard(a) for a in also]

    def _also_span(self, a: Also) -> tuple[bytes, bytes]:
        """The keys an `also` guards: (its key, b"") or, for a `quiet` guard, (its prefix, the prefix's end)."""
        if a.guard == "quiet":
            start = self._dir(a.resource) + a.key.encode()
            return start, prefix_end(start)
        return self._key(a.resource, a.key), b""

    def _also_guard(self, a: Also) -> Compare:
        key, end = self._also_span(a)
        if end:
            return Compare.mod_revision(key, "<", a.expected_revision + 1, range_end=end)
        return Compare.mod_revision(key, "==", a.expected_revision)

    def _also_put(self, also: Sequence[Also]) -> builtins.list[PutOp]:
        """Writes of the `also` objects: each keeps its lease; one expected absent (revision 0) is created."""
        return [
            PutOp(
                self._key(a.resource, a.key),
                self._seal(a.resource, a.key, a.value),
                ignore_lease=a.expected_revision != 0,
            )
            for a in also
            if a.value is not None
        ]

    def _also_read(self, also: Sequence[Also]) -> builtins.list[RangeOp]:
        return [self._also_range(a) for a in also]

    def _also_range(self, a: Also) -> RangeOp:
        key, end = self._also_span(a)
        return RangeOp(key, end, keys_only=True)

    async def _txn(
        self,
        compare: builtins.list[Compare],
        success: builtins.list[Op],
        failure: builtins.list[Op],
        also: Sequence[Also],
    ) -> TxnResult:
        """The transaction, then each `also`'s `settled` told its outcome (None on failure or when unknown)."""
        revision = None
        try:
            result = await self._client.txn(compare=compare, success=success, failure=failure)
            revision = result.revision if result.succeeded else None
            return result
        finally:
            for a in also:
                if a.settled is not None:
                    a.settled(revision)

    @staticmethod
    def _raise_companion_changed(result: TxnResult, also: Sequence[Also], *, first: int) -> None:
        """CompanionChanged naming the first `also` object whose revision moved (responses from `first` on)."""
        for item, response in zip(also, result.responses[first:], strict=False):
            assert isinstance(response, RangeResult)
            current = item.changed(response)
            if current is not None:
                raise CompanionChanged.modified(
                    f"{item.resource} {item.key!r}", expected=item.expected_revision, current=current
                )
        raise CompanionChanged.modified("a companion object")

    async def update(
        self, resource: str, name: str, value: bytes, *, expected_revision: int, also: Sequence[Also] = ()
    ) -> int:
        """Replace the object if its mod_revision still equals `expected_revision` (and write the `also` objects
        with it); the new mod_revision.

        The object keeps its lease. Conflict when it changed since, NotFound when it is gone, CompanionChanged
        when an `also` object changed (nothing written either way).
        """
        if expected_revision <= 0:
            raise Invalid(f"update of {resource} {name!r} needs the expected revision, got {expected_revision}")
        key = self._key(resource, name)
        result = await self._txn(
            [Compare.mod_revision(key, "==", expected_revision), *self._also_compare(also)],
            [PutOp(key, self._seal(resource, name, value), ignore_lease=True), *self._also_put(also)],
            [RangeOp(key, keys_only=True), *self._also_read(also)],
            also,
        )
        if not result.succeeded:
            self._raise_guard_failed(result, resource, name, expected_revision)
            self._raise_companion_changed(result, also, first=1)
        return result.revision

    async def delete(self, resource: str, name: str, *, expected_revision: int = 0, also: Sequence[Also] = ()) -> int:
        """Delete the object if its mod_revision equals `expected_revision`; the deleting revision.

        `expected_revision=0` deletes whatever is there now: the object is read and then deleted by a
        transaction guarded on the revision read, so a write in between makes it Conflict, not lost.
        Conflict when stale, NotFound when absent; the `also` objects are written with it (CompanionChanged when
        one changed).
        """
        if expected_revision == 0:
            expected_revision = (await self.get(resource, name)).mod_revision
        key = self._key(resource, name)
        result = await self._txn(
            [Compare.mod_revision(key, "==", expected_revision), *self._also_compare(also)],
            [DeleteOp(key), *self._also_put(also)],
            [RangeOp(key, keys_only=True), *self._also_read(also)],
            also,
        )
        if not result.succeeded:
            self._raise_guard_failed(result, resource, name, expected_revision)
            self._raise_companion_changed(result, also, first=1)
        return result.revision

    async def delete_with_contents(self, resource: str, name: str, *, expected_revision: int, contents: str) -> int:
        """Delete the object (guarded on `expected_revision` as in `delete`) and, in the same transaction, every
        object of resource `contents`; how many of those went. Either all of it happens or nothing."""
        key = self._key(resource, name)
        directory = self._dir(contents)
        result = await self._client.txn(
            compare=[Compare.mod_revision(key, "==", expected_revision)],
            success=[DeleteOp(key), DeleteOp(directory, prefix_end(directory))],
            failure=[RangeOp(key, keys_only=True)],
        )
        if not result.succeeded:
            self._raise_guard_failed(result, resource, name, expected_revision)
            raise Conflict.modified(f"{resource} {name!r}")
        removed = result.responses[1]
        assert isinstance(removed, DeleteResult)
        return removed.deleted

    @staticmethod
    def _raise_guard_failed(result: TxnResult, resource: str, name: str, expected: int) -> None:
        """Raise NotFound or Conflict after a failed transaction whose failure branch read the key first; return
        when the key is at `expected` (another guard of the transaction failed)."""
        current = result.responses[0]
        assert isinstance(current, RangeResult)
        if not current.kvs:
            raise NotFound(f"{resource} {name!r} not found")
        if current.kvs[0].mod_revision != expected:
            raise Conflict.modified(f"{resource} {name!r}", expected=expected, current=current.kvs[0].mod_revision)

    async def watch(self, resource: str, *, start_revision: int) -> AsyncGenerator[WatchBatch, None]:
        """Changes to `resource` from `start_revision` on (inclusive; 0: from now), as ordered batches.

        Gapless and without duplicates across reconnects; resumes by itself; Expired when compacted. After a
        list at revision R, watch from R + 1.
        """
        directory = self._dir(resource)
        batches = self._client.watch(directory, prefix_end(directory), start_revision=start_revision)
        try:
            async for batch in batches:
                events = [self._event(resource, e, len(directory)) for e in batch.events]
                yield WatchBatch(batch.revision, events)
        finally:
            await batches.aclose()  # ends the etcd stream now, not when the generator is collected

    def _event(self, resource: str, event: Event, dir_len: int) -> StoreEvent:
        name = event.kv.key[dir_len:].decode()
        prev = event.prev_kv
        prev_value = self._open(resource, name, prev.value) if prev is not None else b""
        if event.type == "DELETE":
            create_revision = prev.create_revision if prev is not None else 0
            return StoreEvent("DELETE", name, b"", prev_value, event.kv.mod_revision, create_revision)
        value = self._open(resource, name, event.kv.value)
        return StoreEvent("PUT", name, value, prev_value, event.kv.mod_revision, event.kv.create_revision)

    async def move(
        self, resource: str, old: str, new: str, value: bytes, *, expected_revision: int, lease: int = 0
    ) -> bool:
        """Replace the object at key `old` (if its mod_revision still equals `expected_revision`) by `value` at key
        `new` (which must be free; bound to `lease` when non-zero), in one transaction; False when either guard
        failed (nothing written). How an upgrade moves objects stored before namespaces existed into one: several
        apiservers may race, each object moves once."""
        old_key, new_key = self._key(resource, old), self._key(resource, new)
        result = await self._client.txn(
            compare=[Compare.mod_revision(old_key, "==", expected_revision), Compare.create_revision(new_key, "==", 0)],
            success=[DeleteOp(old_key), PutOp(new_key, self._seal(resource, new, value), lease=lease)],
        )
        return result.succeeded

    async def current_revision(self) -> int:
        """The store's current revision (linearizable): every write so far is at or below it."""
        result = await self._client.range(self._prefix.encode() + b"/", count_only=True)
        return result.revision

    async def compact(self, revision: int) -> None:
        """Discard history below `revision` (lists and watches at older revisions then raise Expired).

        Idempotent: compacting to a revision already compacted is not an error.
        """
        try:
            await self._client.compact(revision)
        except Expired:
            return

    async def grant_lease(self, ttl_seconds: int) -> int:
        """A new etcd lease of `ttl_seconds`; objects created with it vanish (DELETE events) when it expires."""
        return (await self._client.lease_grant(ttl_seconds)).id


__all__ = ["Also", "CompanionChanged", "ListPage", "Store", "StoreEvent", "StoredObject", "WatchBatch"]
