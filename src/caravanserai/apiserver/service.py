"""The generic resource service: Create, Get, List, Update, UpdateStatus, Delete and Watch for every kind.

Guarantees:

* **Every write is a compare-and-swap** on the etcd mod_revision (create: the key must not exist). A stale
  resource_version is `Conflict` (ABORTED); nothing is ever written blindly.
* **Only a caller's precondition yields Conflict.** A write whose caller gave no resource_version (a Delete
  without one) is a read-modify-write of the server's own: when another writer slips in between its read and its
  compare-and-swap, the server reads again and decides again (up to `RMW_ATTEMPTS` times) instead of answering
  Conflict. Update and UpdateStatus always carry the caller's version and are never retried here.
* **Validation before storage.** An object is defaulted, merged (spec/status split) and validated in full before
  etcd sees it; a refusal names every offending field.
* **No-op writes are free.** An Update or UpdateStatus that changes nothing returns the stored object without a
  write, so an idempotent `apply` does not bump versions.
* **Watches come from the watch cache**, never from a per-client etcd watch.
* **Namespaces.** An object of a namespaced kind lives in a namespace (`metadata.namespace`, "default" when a
  create names none) and is stored, cached and locked under its key "namespace/name"; one of a cluster-wide kind
  names none (Invalid naming `metadata.namespace` otherwise). A create into a namespace that does not exist is
  NotFound naming it; into one being deleted, FailedPrecondition (Events excepted: its deletion is reported).
  Get and Delete find the object in the request's namespace ("default" when empty); List and Watch show the
  request's namespace, or every namespace when it is empty.
* **Propagation policies.** A Delete with `propagation_policy` Foreground or Orphan marks the object (deletion
  timestamp) with the finalizer `foregroundDeletion` or `orphan` (never with `force`: refused); the garbage
  collector (`controllers/gc/owners.py`) does the rest and removes it. Background (or empty) changes nothing here.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import structlog

from caravanserai import meta, v1
from caravanserai.apiserver import codec, storedbytes
from caravanserai.apiserver.auth import LOCAL_ADMIN, Authorizer, Identity
from caravanserai.apiserver.eventleases import EventLeases
from caravanserai.apiserver.kinds import NOOP, REMOVE, KindContext, KindStrategy, KindTable
from caravanserai.apiserver.policies import RESOURCE as POLICIES
from caravanserai.apiserver.policies import Policies
from caravanserai.apiserver.watchcache import WatchCache
from caravanserai.apiserver.watchfanout import everything, selection
from caravanserai.clock import Clock
from caravanserai.errors import Conflict, Expired, FailedPrecondition, FieldViolation, Invalid, NotFound, Unavailable
from caravanserai.storage import Store
from caravanserai.storage.store import Also, CompanionChanged
from caravanserai.text.selectors import FieldSelector, LabelSelector
from caravanserai.text.violations import quote

log = structlog.get_logger(__name__)

MAX_OBJECT_BYTES = codec.MAX_OBJECT_BYTES
# Reads and compare-and-swaps a write without a caller precondition makes before it gives up with Conflict (only
# reached when other writers change the object this often in a row).
RMW_ATTEMPTS = 32
AMBIGUOUS_RETRIES = 2
"""Times a Delete without a version is tried again after etcd lost its answer (Unavailable once the object was read):
on another member by then, the next read tells whether the first try removed it."""
NAMESPACES = "namespaces"

T = TypeVar("T")


class ResourceService:
    """The verbs, independent of gRPC plumbing (see `grpcapi` for the wire side). Everything that differs per kind
    is asked of the kind's strategy in `kinds`."""

    def __init__(
        self,
        store: Store,
        kinds: KindTable,
        caches: dict[str, WatchCache],
        *,
        clock: Clock,
        event_leases: EventLeases,
        authorizer: Authorizer | None = None,
    ) -> None:
        self.kinds = kinds
        self._authz = authorizer or Authorizer(kinds)
        self._store = store
        self._caches = caches
        self._clock = clock
        self._event_leases = event_leases
        self._ctx = KindContext(store=store, event_leases=event_leases, kinds=kinds, caches=caches)
        self._policies = Policies(caches.get(POLICIES))  # AdmissionPolicies' hooks, after the kind's own
        self._companion_locks: dict[
            str, asyncio.Lock
        ] = {}  # by companion ("resourcequotas/ns/name"): see `_companions`
        # Called with a resource this apiserver does not serve, before refusing it (the DefinitionServer sets it).
        self.find_kind: Callable[[str], Awaitable[None]] | None = None

    # ---- helpers ------------------------------------------------------------------------------------------

    async def strategy(self, resource: str) -> KindStrategy[Any]:
        """The strategy of `resource`. A resource not served yet is first offered to `find_kind` (which waits for a
        definition stored in etcd that this apiserver has not followed yet), then refused (Invalid naming
        `resource`): a kind defined through another apiserver, or another worker, is served here on its first
        request, not refused during the moment this one lags."""
        strategy = self.kinds.get(resource)
        if strategy is None and self.find_kind is not None:
            await self.find_kind(resource)
        return self.kinds.require(resource)

    async def watch_cache(self, resource: str) -> WatchCache:
        """The watch cache of `resource` (found as `strategy` finds kinds)."""
        await self.strategy(resource)
        return self._caches[resource]

    def wrap(self, resource: str, obj: Any) -> v1.Object:
        """`obj` of `resource` in the `v1.Object` envelope."""
        return self.kinds.require(resource).kind.wrap(obj)

    def _unwrap(self, strategy: KindStrategy[Any], envelope: v1.Object) -> Any:
        obj = strategy.unwrap(envelope)
        if obj.api_version and obj.api_version != strategy.api_version:
            raise Invalid.of([FieldViolation("apiVersion", f"must be {strategy.api_version}")])
        if obj.kind and obj.kind != strategy.kind.kind:
            raise Invalid.of([FieldViolation("kind", f"must be {strategy.kind.kind}")])
        return obj

    @staticmethod
    def _name(field: str, name: str) -> str:
        """`name` when it can name a stored object at all; Invalid naming `field` when it is empty or holds a
        path separator (the store would refuse it without saying which field)."""
        if not name:
            raise Invalid.of([FieldViolation(field, "is required")])
        if "/" in name or name in (".", ".."):
            raise Invalid.of([FieldViolation(field, f"{quote(name)} cannot be an object name")])
        return name

    def _key(self, strategy: KindStrategy[Any], namespace: str, name: str) -> str:
        """The key of the object `name` of a request that gives `namespace` (ignored for a cluster-wide kind, as
        kubectl ignores -n for nodes; empty: "default"); Invalid naming `name` or `namespace`."""
        self._name("name", name)
        if strategy.kind.cluster_scoped:
            return name
        return meta.join_key(self._name("namespace", namespace or meta.DEFAULT_NAMESPACE), name)

    def _key_of(self, strategy: KindStrategy[Any], obj: Any) -> str:
        """The key of the object a Create or an Update carries, its namespace defaulted in place; Invalid naming
        `metadata.name` or `metadata.namespace`."""
        name = self._name("metadata.name", obj.metadata.name)
        if strategy.kind.cluster_scoped:
            if obj.metadata.namespace:
                kind = strategy.kind.kind
                raise Invalid.of([FieldViolation("metadata.namespace", f"must be empty: a {kind} is cluster-wide")])
            return name
        obj.metadata.namespace = obj.metadata.namespace or meta.DEFAULT_NAMESPACE
        return meta.join_key(self._name("metadata.namespace", obj.metadata.namespace), name)

    async def _require_namespace(self, strategy: KindStrategy[Any], namespace: str) -> None:
        """Refuse a create into a namespace that does not exist (NotFound naming it) or is being deleted
        (FailedPrecondition; Events are still recorded there). Read from the watch cache, from etcd when the cache
        does not hold it (yet)."""
        cache = self._caches.get(NAMESPACES)
        found = cache.get(namespace) if cache is not None else None
        if found is None:
            try:
                item = await self._store.get(NAMESPACES, namespace)
            except NotFound:
                raise NotFound(f'namespace "{namespace}" not found (metadata.namespace)') from None
            found = codec.decode(v1.Namespace, item.value, item.mod_revision)
        if found.metadata.HasField("deletion_timestamp") and not strategy.recorded_while_terminating:
            raise FailedPrecondition(
                f'namespace "{namespace}" is being deleted: no new {strategy.plural} in it (metadata.namespace)'
            )

    async def _current(self, strategy: KindStrategy[Any], name: str, expected: str) -> Any:
        """The stored object, which must be at version `expected` (Conflict otherwise).

        Served from the watch cache when the cache already holds exactly that version (the following CAS proves it
        is still current), from etcd otherwise.
        """
        resource = strategy.plural
        cached = self._caches[resource].get(name)
        if cached is not None and expected and cached.metadata.resource_version == expected:
            return cached
        item = await self._store.get(resource, name)
        current = codec.decode(strategy.kind.cls, item.value, item.mod_revision)
        if expected and current.metadata.resource_version != expected:
            raise _conflict(self.kinds, resource, name, expected=expected, current=current.metadata.resource_version)
        return current

    async def _read_modify_write(
        self, resource: str, name: str, precondition: str, attempt: Callable[[], Awaitable[T]]
    ) -> T:
        """`attempt()`, a read followed by a compare-and-swap on the version read.

        With a caller `precondition` a Conflict is the caller's and is raised (worded with the kind). Without one
        the Conflict can only be with the server's own read, so `attempt` runs again with a fresh read.
        """
        for tries in range(1, RMW_ATTEMPTS + 1):
            try:
                return await attempt()
            except CompanionChanged:
                if tries == RMW_ATTEMPTS:
                    raise
                continue  # an object written with this one (a quota) changed: never the caller's conflict
            except Conflict as exc:
                if precondition or tries == RMW_ATTEMPTS:
                    raise _conflict(self.kinds, resource, name, expected=exc.expected, current=exc.current) from None
                log.debug(
                    "retrying a write without precondition after a concurrent write", resource=resource, name=name
                )
        raise AssertionError("unreachable")

    async def _write(self, resource: str, obj: Any, *, expected: str, also: list[Also] | None = None) -> Any:
        revision = await self._store.update(
            resource, meta.key_of(obj), codec.encode(obj), expected_revision=int(expected), also=also or ()
        )
        obj.metadata.resource_version = str(revision)
        return obj

    # ---- verbs --------------------------------------------------------------------------------------------

    async def create(self, resource: str, envelope: v1.Object, *, who: Identity = LOCAL_ADMIN) -> Any:
        strategy = await self.strategy(resource)
        obj = self._unwrap(strategy, envelope)
        key = self._key_of(strategy, obj)
        self._authz.check(who, "create", resource, name=obj.metadata.name, obj=obj)
        strategy.prepare_create(obj, now=self._clock.now())
        obj = await strategy.mutate(self._ctx, obj, None)
        obj = await self._policies.mutate(strategy, obj, None)
        strategy.validate(obj)
        await strategy.before_create(self._ctx, obj)
        await self._policies.validate(strategy, obj, None)
        if not strategy.kind.cluster_scoped:
            await self._require_namespace(strategy, obj.metadata.namespace)
        lease = await strategy.create_lease(self._ctx)
        obj = await self._create_with_companions(strategy, key, obj, lease)
        revision = obj.metadata.resource_version
        log.debug("created", resource=resource, key=key, revision=revision)
        await strategy.after_write(self._ctx, obj)
        return obj

    async def _create_with_companions(self, strategy: KindStrategy[Any], key: str, obj: Any, lease: int) -> Any:
        """Store (a copy of) `obj` with the objects its strategy writes alongside, read again after one of them
        changed; the object as stored (its strategy may have held it back: Queued)."""
        for tries in range(1, RMW_ATTEMPTS + 1):
            candidate = meta.copy(obj)
            async with self._companions(strategy, None, candidate, fresh=lambda: meta.copy(obj)) as (stored, also):
                try:
                    revision = await self._store.create(
                        strategy.plural, key, codec.encode(stored), lease=lease, also=also
                    )
                except CompanionChanged:
                    if tries == RMW_ATTEMPTS:
                        raise
                    continue
                stored.metadata.resource_version = str(revision)
                return stored
        raise AssertionError("unreachable")

    @contextlib.asynccontextmanager
    async def _companions(
        self, strategy: KindStrategy[Any], old: Any, new: Any, *, fresh: Callable[[], Any] | None = None
    ) -> AsyncIterator[tuple[Any, list[Also]]]:
        """(`new`, the objects to write with it). The block runs holding this apiserver's locks: those the strategy
        names (`companion_locks`, the companions computed once under them), or else one per companion (computed
        first, then again under the locks; `fresh()` gives a new `new` to decide on): writes of one apiserver that
        share a companion (a namespace's quota, a cohort's quotas) take turns instead of colliding, so only writes
        through other apiservers can make one read again."""
        named = strategy.companion_locks(self._ctx, old, new)
        if named is None:
            also = await strategy.companions(self._ctx, old, new, now=self._clock.now())
            if not also:
                yield new, also
                return
            keys = sorted({f"{a.resource}/{a.key}" for a in also})
        elif not named:
            yield new, await strategy.companions(self._ctx, old, new, now=self._clock.now())
            return
        else:
            keys = sorted(set(named))
        async with contextlib.AsyncExitStack() as held:
            for key in keys:
                await held.enter_async_context(self._companion_locks.setdefault(key, asyncio.Lock()))
            if fresh is not None:
                new = fresh()
            yield new, await strategy.companions(self._ctx, old, new, now=self._clock.now())

    async def get(self, resource: str, name: str, *, namespace: str = "", who: Identity = LOCAL_ADMIN) -> Any:
        strategy = await self.strategy(resource)
        item = await self._store.get(resource, self._key(strategy, namespace, name))
        obj = codec.decode(strategy.kind.cls, item.value, item.mod_revision)
        self._authz.check(who, "get", resource, name=name, obj=obj)
        return obj

    async def list(self, request: v1.ListRequest, *, who: Identity = LOCAL_ADMIN) -> v1.ListResponse:
        """The objects the request selects (see `list_bytes`), as a message."""
        return v1.ListResponse.FromString(await self.list_bytes(request, who=who))

    async def list_bytes(self, request: v1.ListRequest, *, who: Identity = LOCAL_ADMIN) -> bytes:
        """The serialized `v1.ListResponse` of the objects the request selects, read from etcd in one snapshot (pages
        of `limit`, continued by token). It is assembled from the stored bytes (`storedbytes`): an object is decoded
        only when a selector or the caller's visibility has to look at it."""
        resource = request.resource
        strategy = await self.strategy(resource)
        namespace = "" if strategy.kind.cluster_scoped else request.namespace
        self._authz.check(who, "list", resource, field_selector=request.field_selector, namespace=namespace)
        labels = LabelSelector.parse(request.label_selector)
        fields = FieldSelector.parse(request.field_selector, kind=strategy.kind.kind)
        visible = self._authz.visible(who, strategy)
        picks = selection(labels, fields, visible)
        token = getattr(request, "continue")
        revision, after = _decode_continue(token)
        limit = max(0, request.limit)
        kind, cls = strategy.kind, strategy.kind.cls
        items: list[bytes] = []
        more = False
        if namespace:
            self._name("namespace", namespace)
        pages = self._store.pages(
            resource, start_after=after, revision=revision, page_size=limit or 1000, namespace=namespace
        )
        try:
            async for page in pages:
                revision = page.revision
                for index, item in enumerate(page.items):
                    blob = storedbytes.versioned(cls, item.value, item.mod_revision)
                    if picks is everything or picks(cls.FromString(blob)):
                        items.append(storedbytes.list_item(kind, blob))
                    after = item.name
                    if limit and len(items) == limit:
                        more = page.more or index < len(page.items) - 1
                        break
                if limit and len(items) == limit:
                    break
        except Expired:
            raise Expired("the list's continue token has expired (compacted); list again from the start") from None
        except Invalid:  # etcd refuses a revision it has not reached yet: only a token can name one
            if not token:
                raise
            raise Invalid.of([FieldViolation("continue", "names a revision this server has not reached")]) from None
        finally:
            await pages.aclose()
        items.append(
            storedbytes.list_trailer(str(revision), _encode_continue(revision, after) if limit and more else "")
        )
        return b"".join(items)

    async def update(self, resource: str, envelope: v1.Object, *, who: Identity = LOCAL_ADMIN) -> Any:
        strategy = await self.strategy(resource)
        new = self._unwrap(strategy, envelope)
        key = self._key_of(strategy, new)
        return await self._read_modify_write(
            resource,
            key,
            new.metadata.resource_version,
            lambda: self._update_once(strategy, new, key, who),
        )

    async def _update_once(self, strategy: KindStrategy[Any], new: Any, name: str, who: Identity) -> Any:
        resource = strategy.plural
        old = await self._current(strategy, name, new.metadata.resource_version)
        merged = strategy.prepare_update(old, new)
        self._authz.check(who, "update", resource, name=old.metadata.name, obj=merged, old=old)
        merged = await strategy.mutate(self._ctx, merged, old)
        merged = await self._policies.mutate(strategy, merged, old)
        strategy.validate(merged)
        if merged == old:
            return old
        await strategy.before_update(self._ctx, old, merged)
        await self._policies.validate(strategy, merged, old)
        if strategy.removable_after_update(merged):
            async with self._companions(strategy, old, None) as (_, also):
                expected = int(old.metadata.resource_version)
                await self._store.delete(resource, name, expected_revision=expected, also=also)
            return merged
        async with self._companions(strategy, old, merged) as (_, also):
            written = await self._write(resource, merged, expected=old.metadata.resource_version, also=also)
        await strategy.after_write(self._ctx, written)
        return written

    async def update_status(self, resource: str, envelope: v1.Object, *, who: Identity = LOCAL_ADMIN) -> Any:
        strategy = await self.strategy(resource)
        new = self._unwrap(strategy, envelope)
        key = self._key_of(strategy, new)
        return await self._read_modify_write(
            resource,
            key,
            new.metadata.resource_version,
            lambda: self._update_status_once(strategy, new, key, who),
        )

    async def _update_status_once(self, strategy: KindStrategy[Any], new: Any, name: str, who: Identity) -> Any:
        resource = strategy.plural
        old = await self._current(strategy, name, new.metadata.resource_version)
        self._authz.check(who, "update_status", resource, name=old.metadata.name, obj=new, old=old)
        merged = strategy.prepare_status(old, new, now=self._clock.now())
        strategy.validate_status(merged)
        if merged == old:
            return old
        async with self._companions(strategy, old, merged) as (_, also):
            return await self._write(resource, merged, expected=old.metadata.resource_version, also=also)

    async def delete(self, request: v1.DeleteRequest, *, who: Identity = LOCAL_ADMIN) -> v1.DeleteResponse:
        """Remove or mark the object (as the kind's delete plan says); without `request.resource_version` a concurrent
        write makes the server read again, never Conflict.

        Without a version, a try whose write etcd may or may not have carried out (Unavailable after the object was
        read: the member went away mid-call) is made again, up to `AMBIGUOUS_RETRIES` times: an object still there
        is deleted (or found marked already), and one gone by then is answered deleted, as last read — the end
        the caller asked for, whichever try (or whoever else) reached it. With a version it is Unavailable: the
        caller decides."""
        resource = request.resource
        strategy = await self.strategy(resource)
        key = self._key(strategy, request.namespace, request.name)
        read: list[Any] = []  # the object the last try read (none yet: nothing can have been written)

        def attempt() -> Awaitable[v1.DeleteResponse]:
            return self._delete_once(strategy, request, key, who, read)

        for tries in range(AMBIGUOUS_RETRIES + 1):
            lost = bool(tries)  # an earlier try's answer was lost
            try:
                return await self._read_modify_write(resource, key, request.resource_version, attempt)
            except Unavailable:
                if request.resource_version or not read or tries == AMBIGUOUS_RETRIES:
                    raise
                log.info("a delete's answer was lost; reading again", resource=resource, key=key)
            except NotFound:
                if not lost:
                    raise
                log.info("deleted (found gone after a lost answer)", resource=resource, key=key)
                return v1.DeleteResponse(object=strategy.kind.wrap(read[-1]), deleted=True)
        raise AssertionError("unreachable")

    async def _delete_once(
        self, strategy: KindStrategy[Any], request: v1.DeleteRequest, key: str, who: Identity, read: builtins.list[Any]
    ) -> v1.DeleteResponse:
        resource, name = request.resource, request.name
        finalizer = _propagation_finalizer(request.propagation_policy)
        if finalizer and request.force:
            raise Invalid.of(
                [
                    FieldViolation(
                        "propagationPolicy",
                        f"{request.propagation_policy} cannot be combined with force (a forced delete removes the "
                        "object at once, and the garbage collector would then delete its dependents)",
                    )
                ]
            )
        current = await self._current(strategy, key, request.resource_version)
        read[:] = [current]
        self._authz.check(who, "delete", resource, name=name, obj=current, force=request.force)
        await strategy.before_delete(self._ctx, current, force=request.force)
        if finalizer and not current.metadata.HasField("deletion_timestamp"):
            current = _with_finalizer(current, finalizer)
        plan = await strategy.plan_delete(self._ctx, current, force=request.force, now=self._clock.now())
        if plan == NOOP:
            return v1.DeleteResponse(object=strategy.kind.wrap(current), deleted=False)
        if plan == REMOVE:
            async with self._companions(strategy, current, None) as (_, also):
                cascaded = await strategy.remove(self._ctx, current, also=also)
            log.info("deleted", resource=resource, key=key, force=request.force, instances=cascaded)
            return v1.DeleteResponse(object=strategy.kind.wrap(current), deleted=True, deleted_instances=cascaded)
        marked = strategy.mark_deleted(current, plan, now=self._clock.now())
        stored = await self._write(resource, marked, expected=current.metadata.resource_version)
        log.info("marked for deletion", resource=resource, key=key, phase=getattr(stored.status, "phase", ""))
        return v1.DeleteResponse(object=strategy.kind.wrap(stored), deleted=False)

    def serve(self, strategy: KindStrategy[Any], cache: WatchCache) -> None:
        """Start serving a kind (a custom kind whose definition appeared) with its watch cache."""
        self._caches[strategy.plural] = cache
        self.kinds.add(strategy)

    def unserve(self, plural: str) -> WatchCache | None:
        """Stop serving a kind; its watch cache (for the caller to close), if it was served."""
        self.kinds.remove(plural)
        return self._caches.pop(plural, None)

    @property
    def authorizer(self) -> Authorizer:
        return self._authz

    def cache(self, resource: str) -> WatchCache:
        self.kinds.require(resource)
        return self._caches[resource]


def _propagation_finalizer(policy: str) -> str:
    """The finalizer a Delete with `policy` puts on the object ("" for Background); Invalid for another value."""
    if policy in ("", meta.PROPAGATION_BACKGROUND):
        return ""
    if policy == meta.PROPAGATION_FOREGROUND:
        return meta.FINALIZER_FOREGROUND
    if policy == meta.PROPAGATION_ORPHAN:
        return meta.FINALIZER_ORPHAN
    allowed = ", ".join(meta.PROPAGATION_POLICIES)
    raise Invalid.of([FieldViolation("propagationPolicy", f"must be one of {allowed}, not {quote(policy)}")])


def _with_finalizer(obj: Any, finalizer: str) -> Any:
    """A copy of `obj` (which may be the watch cache's) holding `finalizer`."""
    marked = meta.copy(obj)
    if finalizer not in marked.metadata.finalizers:
        marked.metadata.finalizers.append(finalizer)
    return marked


def _conflict(kinds: KindTable, resource: str, name: str, *, expected: str, current: str) -> Conflict:
    return Conflict.modified(f"{kinds.require(resource).kind.kind} {name}", expected=expected, current=current)


def _encode_continue(revision: int, after: str) -> str:
    raw = json.dumps({"rv": revision, "after": after}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str) -> tuple[int, str]:
    """(revision, last name) of a token made by `_encode_continue`; Invalid naming `continue` for anything else,
    such as a revision outside etcd's range or a name that is not valid Unicode."""
    if not token:
        return 0, ""
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        revision, after = data["rv"], data["after"]
        if type(revision) is not int or not 0 < revision < 2**63 or not isinstance(after, str):
            raise ValueError("not a token of this server")
        after.encode()  # json.loads lets "\ud800" through; etcd keys must be UTF-8
        return revision, after
    except (ValueError, KeyError, TypeError):  # UnicodeError is a ValueError
        raise Invalid.of([FieldViolation("continue", "malformed continue token")]) from None


__all__ = ["MAX_OBJECT_BYTES", "RMW_ATTEMPTS", "ResourceService"]
