"""The server-side strategy of a kind, and the table of kinds an apiserver serves.

A `KindStrategy` owns everything the apiserver does differently per kind: defaulting on create, validation, the
spec/status split on update, the delete plan and the authorization rules for nodes and controllers. The generic
verbs (`ResourceService`), the watch cache and the authorizer dispatch through a `KindTable` and never name a
kind. The base class implements the common behaviour; each kind's module overrides only what differs.

Guarantees of the base behaviour:

* Create refuses client-set resource_version and deletion_timestamp (and status, for kinds with
  `status_on_create=False`), then sets type meta, a uid (the one the client proposed, which must be a UUID, else
  a fresh one: a client that repeats a Create after losing the reply recognises its object by it), generation 1
  and the creation time.
* Update takes metadata (labels, annotations, finalizers, owner references) and spec from the request, everything
  else from the stored object, and bumps generation only when the spec changed. UpdateStatus takes only the status.
* Delete removes the record at once unless finalizers remain (then the object is marked with a
  deletion_timestamp and removed once an update empties them). A Delete with the Foreground or Orphan
  propagation policy adds its finalizer (`foregroundDeletion`, `orphan`) first; the garbage collector removes it.

A strategy is generic over its kind's message class (`KindStrategy[v1.Project]`): every hook takes and returns
that class, so a kind's module is type-checked against its own fields. The class must have the shape of
`KindObject` (type meta, metadata, spec, status), as every kind's message has. The table holds strategies of
different kinds and so stores `KindStrategy[Any]`; custom kinds, whose classes are built at run time, are
`KindStrategy[Any]` too.
"""

from __future__ import annotations

import abc
import asyncio
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, Self, TypeVar

from google.protobuf.message import DecodeError, Message

from caravanserai import meta, v1
from caravanserai.apiserver.eventleases import EventLeases
from caravanserai.apiserver.kinds.quotabook import QuotaBook
from caravanserai.clock import timestamp
from caravanserai.errors import FieldViolation, Invalid
from caravanserai.storage import Store
from caravanserai.storage.store import Also

# Delete plans.
REMOVE, MARK, FINALIZE, NOOP = "remove", "mark", "finalize", "noop"


class KindObject(Protocol):
    """What the base strategy reads and writes on an object of any kind: type meta, metadata, a spec and a status
    (every kind's message has them; `v1.Project`, `v1.Node` … match this protocol as they are)."""

    api_version: str
    kind: str

    @property
    def metadata(self) -> v1.ObjectMeta: ...

    @property
    def spec(self) -> Message: ...

    @property
    def status(self) -> Message: ...

    def HasField(self, field_name: Literal["status"]) -> bool: ...

    def CopyFrom(self, other_msg: Self) -> None: ...


T = TypeVar("T", bound=KindObject)
"""The message class of a strategy's kind."""


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


class CachedObjects(Protocol):
    """A watch cache as strategies read it: the current copy of the object at a key, if it holds one; every
    object by key."""

    @property
    def objects(self) -> Mapping[str, Any]: ...

    def get(self, name: str) -> Any | None: ...


@dataclass(frozen=True, slots=True)
class KindContext:
    """What the few non-pure hooks of a strategy may use: the store (read only), the event leases and the watch
    caches (read only: decoded copies of objects by resource and key, which may lag etcd; a hook that relies on
    one guards the write on the copy's version)."""

    store: Store
    event_leases: EventLeases
    kinds: KindTable | None = None  # the served kinds, for hooks that wait for a kind to be served
    caches: Mapping[str, CachedObjects] = field(default_factory=dict)
    quota_book: QuotaBook = field(default_factory=QuotaBook)  # what this apiserver keeps of quotas between writes


def stamp(field: Any, now: float) -> None:
    """Set the Timestamp message `field` to `now`, whatever descriptor pool its class comes from (custom kinds'
    classes are built in a private pool, so CopyFrom of a `google.protobuf.Timestamp` would be refused)."""
    value = timestamp(now)
    field.seconds, field.nanos = value.seconds, value.nanos


class KindStrategy(abc.ABC, Generic[T]):
    """What the apiserver does to objects of one kind (of message class `T`) on each verb. Pure except for
    `before_create`, `before_update`, `after_write`, `before_delete`, `remove` and `create_lease`, which may use
    the store."""

    #: May a client set status on Create (kinds whose status is unused or written by their creator)?
    status_on_create = True
    #: Verbs `controller:*` identities may use besides reading.
    controller_writes: frozenset[str] = frozenset()
    #: May a node read the objects that a project bound to it references (`caravanserai.project.datarefs`, and the
    #: Secrets of the BackupRepositories it uses: `kinds.nodegraph`)? Its lists and watches then carry only those
    #: objects (the node authorizer's rule, `apiserver.auth`).
    node_reads_referenced = False
    #: Do a node's lists and watches of this kind carry only the objects `node_sees` lets through (projects: those
    #: bound to it)? Its gets are the strategy's `node_allows` to judge, with the stored object.
    node_filters = False
    #: May objects be created in a namespace being deleted (Events: what happens during the deletion)?
    recorded_while_terminating = False
    #: Does the apiserver read this kind's cached objects on its request paths (quotas on project writes,
    #: namespaces on creates, roles, policies, definitions)? Its watch cache then keeps each object decoded beside
    #: its bytes (`compactobjects`); other kinds are held as bytes only and decoded on read.
    cache_decoded = False

    def __init__(self, kind: meta.Kind) -> None:
        self.kind = kind

    @property
    def plural(self) -> str:
        return self.kind.plural

    @property
    def confidential(self) -> bool:
        """Confidential kinds (`meta.Kind.confidential`: Secrets) are read only by admin, controllers and nodes as
        `node_reads_referenced` says; every other identity is refused every verb; they are encrypted at rest."""
        return self.kind.confidential

    # ---- create ---------------------------------------------------------------------------------------------

    def prepare_create(self, obj: T, *, now: float) -> None:
        """Default a new object in place (see the module docstring); Invalid for fields a client may not set."""
        violations: list[FieldViolation] = []
        if obj.metadata.resource_version:
            violations.append(FieldViolation("metadata.resourceVersion", "must not be set on create"))
        if obj.metadata.HasField("deletion_timestamp"):
            violations.append(FieldViolation("metadata.deletionTimestamp", "must not be set on create"))
        if not self.status_on_create and obj.HasField("status") and obj.status.ByteSize():
            violations.append(FieldViolation("status", "must not be set on create; use UpdateStatus"))
        if obj.metadata.uid and not _is_uuid(obj.metadata.uid):
            violations.append(FieldViolation("metadata.uid", "must be a UUID, or empty (the server picks one)"))
        if violations:
            raise Invalid.of(violations, what=self.kind.kind)
        obj.api_version = self.api_version
        obj.kind = self.kind.kind
        obj.metadata.uid = obj.metadata.uid or str(uuid.uuid4())  # a client's own uid makes its retries exact
        obj.metadata.generation = 1
        stamp(obj.metadata.creation_timestamp, now)
        self.default_new(obj, now=now)

    @property
    def api_version(self) -> str:
        return self.kind.api_version

    async def mutate(self, ctx: KindContext, obj: T, old: T | None) -> T:
        """The object to validate and store after admission changes (`old`: the stored object on update, None on
        create); called after defaulting, before validation. By default `obj` unchanged."""
        return obj

    async def before_create(self, ctx: KindContext, obj: T) -> None:
        """Refuse a create that conflicts with other stored objects (checked after validation)."""

    async def before_update(self, ctx: KindContext, old: T, new: T) -> None:
        """Refuse an update that conflicts with stored objects (checked after validation; `new` changed)."""

    async def companions(self, ctx: KindContext, old: T | None, new: T | None, *, now: float) -> list[Also]:
        """Other objects to write in the same etcd transaction as this write of `new` over `old` (`old` None: a
        create; `new` None: the removal of `old`), each guarded on the version read (the service reads and decides
        again when one changed). May change `new` before it is stored (a project held back in Queued) or refuse
        the write. None by default."""
        return []

    def companion_locks(self, ctx: KindContext, old: T | None, new: T | None) -> list[str] | None:
        """Names of this apiserver's locks that a write of `new` over `old` holds while its companions are computed
        and written, found without I/O (from the watch caches: a stale answer costs at most a retry, the companions'
        versions guard the write); None: compute the companions first, lock each of them, and compute them again
        under the locks. None by default."""
        return None

    async def after_write(self, ctx: KindContext, obj: T) -> None:
        """Called after a Create or an Update stored `obj`, before the reply; by default nothing."""

    def unwrap(self, envelope: v1.Object) -> T:
        """The request's object of this kind (a copy the service owns); Invalid naming `kind` for another kind."""
        try:
            obj: T = self.kind.unwrap(envelope)  # `meta.Kind.cls` is untyped: the kind's class is `T` by construction
            return meta.copy(obj)
        except DecodeError as exc:
            raise Invalid.of([FieldViolation("object", f"not a valid {self.kind.kind} message: {exc}")]) from None
        except ValueError as exc:
            raise Invalid.of([FieldViolation("kind", f"request for {self.plural} carries {exc}")]) from None

    def default_new(self, obj: T, *, now: float) -> None:
        """Kind-specific defaults of a new object (after the common ones)."""

    async def create_lease(self, ctx: KindContext) -> int:
        """The etcd lease a new object is bound to (0: none, the object lives until deleted)."""
        return 0

    # ---- validation -----------------------------------------------------------------------------------------

    @abc.abstractmethod
    def validate(self, obj: T) -> None:
        """Invalid listing every violation of type meta, metadata and spec (Create and Update). Every kind
        defines its own rules."""

    @abc.abstractmethod
    def validate_status(self, obj: T) -> None:
        """Invalid listing every violation of the status (UpdateStatus). Every kind defines its own rules."""

    # ---- update ---------------------------------------------------------------------------------------------

    def prepare_update(self, old: T, new: T) -> T:
        """The object to store for an Update of `old` with `new` (a fresh message; neither input changes)."""
        self.require_version(new)
        merged = meta.copy(old)
        merged.spec.CopyFrom(new.spec)
        merged.metadata.labels.clear()
        merged.metadata.labels.update(new.metadata.labels)
        merged.metadata.annotations.clear()
        merged.metadata.annotations.update(new.metadata.annotations)
        del merged.metadata.finalizers[:]
        merged.metadata.finalizers.extend(new.metadata.finalizers)
        del merged.metadata.owner_references[:]
        merged.metadata.owner_references.extend(new.metadata.owner_references)
        if merged.spec != old.spec:
            merged.metadata.generation = old.metadata.generation + 1
        return merged

    def prepare_status(self, old: T, new: T, *, now: float) -> T:
        """The object to store for an UpdateStatus of `old` with `new`: new status, everything else from `old`."""
        self.require_version(new)
        merged = meta.copy(old)
        merged.status.CopyFrom(new.status)
        return merged

    def require_version(self, obj: T) -> None:
        if not obj.metadata.resource_version:
            raise Invalid.of(
                [FieldViolation("metadata.resourceVersion", "required: pass the version you read")], what=self.kind.kind
            )

    # ---- delete ---------------------------------------------------------------------------------------------

    async def before_delete(self, ctx: KindContext, obj: T, *, force: bool) -> None:
        """Refuse (FailedPrecondition) a delete that must not happen now."""

    async def remove(self, ctx: KindContext, obj: T, *, also: list[Also] | None = None) -> int:
        """Remove the record of `obj` (compare-and-swap on its version; `also` written in the same transaction);
        how many other objects went with it."""
        revision = int(obj.metadata.resource_version)
        await ctx.store.delete(self.plural, meta.key_of(obj), expected_revision=revision, also=also or ())
        return 0

    def delete_plan(self, obj: T, *, force: bool) -> str:
        """REMOVE (the record goes now), MARK/FINALIZE (the record is marked for deletion) or NOOP (already
        marked)."""
        if obj.metadata.finalizers and not force:
            return NOOP if obj.metadata.HasField("deletion_timestamp") else FINALIZE
        return REMOVE

    async def plan_delete(self, ctx: KindContext, obj: T, *, force: bool, now: float) -> str:
        """`delete_plan`, for a kind whose plan depends on other stored objects (ResourceDefinitions: their
        instances' finalizers); called once per delete attempt, before the plan is carried out."""
        return self.delete_plan(obj, force=force)

    def mark_deleted(self, obj: T, plan: str, *, now: float) -> T:
        """A copy of `obj` marked for deletion under `plan` (MARK or FINALIZE)."""
        marked = meta.copy(obj)
        if not marked.metadata.HasField("deletion_timestamp"):
            stamp(marked.metadata.deletion_timestamp, now)
        return marked

    def removable_after_update(self, obj: T) -> bool:
        """True when an updated object should now disappear: deletion was requested and no finalizer is left."""
        return obj.metadata.HasField("deletion_timestamp") and not obj.metadata.finalizers

    # ---- authorization ----------------------------------------------------------------------------------------

    def node_allows(
        self, node: str, verb: str, *, name: str, obj: T | None, old: T | None, field_selector: str
    ) -> bool:
        """May identity `node:<node>` do `verb`? Nodes have no access unless a kind says so."""
        return False

    def node_sees(self, node: str, obj: T) -> bool:
        """With `node_filters`: whether a list or watch of identity `node:<node>` carries `obj`."""
        return True

    def controller_allows(self, controller: str, verb: str, *, obj: T | None, old: T | None, force: bool) -> bool:
        """May identity `controller:<controller>` do `verb` (a write beyond `controller_writes`) on `obj` (`old`:
        the stored object; `force`: a forced delete)? A narrow, per-controller exception; none by default."""
        return False

    def admin_only(self, obj: T) -> list[FieldViolation]:
        """The fields of `obj` (to be created or to replace the stored one) that only an admin may set, each with
        what it would allow; the authorizer refuses every other writer when any is found. None by default."""
        return []

    def granted(self, obj: T, roles: Any) -> tuple[str, list[v1.PolicyRule]] | None:
        """For an object that grants access (roles and bindings): (namespace, "" = cluster-wide; the rules it
        grants there), looked up in `roles` (an `apiserver.rbac.RoleIndex`); the authorizer refuses a writer who
        does not hold them. None for every other kind."""
        return None

    def node_restricted(self, node: str, verb: str, obj: T, old: T | None) -> list[FieldViolation]:
        """The fields a node identity may not write in this `verb` of `obj` (`old`: the stored object) even where
        `node_allows` lets it write the object; the authorizer refuses the write when any is found."""
        return []


class KindTable:
    """The kinds one apiserver serves, by plural. The one place requests find their kind's strategy."""

    def __init__(self, strategies: list[KindStrategy[Any]] | None = None) -> None:
        self._by_plural: dict[str, KindStrategy[Any]] = {}
        self._changed = asyncio.Event()  # set (and replaced) on every add and remove
        for strategy in strategies or ():
            self.add(strategy)

    def add(self, strategy: KindStrategy[Any]) -> None:
        self._by_plural[strategy.plural] = strategy
        self._notify()

    def remove(self, plural: str) -> None:
        self._by_plural.pop(plural, None)
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_until(self, predicate: Callable[[KindTable], bool], timeout: float) -> bool:
        """Wait until `predicate(self)` holds, re-checked after every add and remove; False after `timeout` s."""
        try:
            async with asyncio.timeout(timeout):
                while not predicate(self):
                    await self._changed.wait()
        except TimeoutError:
            return False
        return True

    def get(self, plural: str) -> KindStrategy[Any] | None:
        return self._by_plural.get(plural)

    def __contains__(self, plural: object) -> bool:
        return plural in self._by_plural

    def __iter__(self) -> Iterator[KindStrategy[Any]]:
        return iter(list(self._by_plural.values()))

    def plurals(self) -> list[str]:
        return sorted(self._by_plural)

    def require(self, plural: str) -> KindStrategy[Any]:
        """The strategy for `plural`; Invalid naming the field `resource` and the known resources otherwise."""
        strategy = self._by_plural.get(plural)
        if strategy is None:
            known = ", ".join(self.plurals())
            raise Invalid.of([FieldViolation("resource", f"unknown resource {plural!r}; known: {known}")])
        return strategy


__all__ = ["FINALIZE", "KindContext", "KindObject", "KindStrategy", "KindTable", "MARK", "NOOP", "REMOVE", "T", "stamp"]
