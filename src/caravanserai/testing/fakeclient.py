"""An in-memory client with the real `Client`'s interface for resources: reconcile and handler logic is unit-tested
without a server (controller-runtime's fake client).

    client = FakeClient(clock=FakeClock())
    backups = client.resource(Backup)              # any registered kind: built-in or custom
    stored = await backups.create(backup)          # uid, resourceVersion, generation 1, creationTimestamp
    await backups.update(stored)                   # Conflict when stored.metadata.resource_version is stale

What it keeps of the apiserver's generic rules (`caravanserai.apiserver.kinds.base`), so that code passing against
it behaves the same against a server:

* **Versions.** One counter for the whole client, as etcd's revision: every write gets the next one as its
  `resource_version`. Update, UpdateStatus and a Delete with a version are compare-and-swap on it (`Conflict`,
  worded as the server's); Update and UpdateStatus require one (`Invalid` naming `metadata.resourceVersion`).
  A write that changes nothing returns the stored object with its version unchanged.
* **Create** refuses a taken name (`AlreadyExists`), a client-set resourceVersion or deletionTimestamp (`Invalid`);
  it sets type meta, a uid (the proposed one, else a fresh one), generation 1 and the creation time (the clock's).
* **Update** takes labels, annotations, finalizers and spec, bumps generation only when the spec changed and
  keeps the status. **UpdateStatus** takes only the status. `NotFound` for an absent object.
* **Finalizers.** Delete of an object with finalizers sets its deletionTimestamp (once) and keeps it; the update
  that empties the finalizers removes it. `force=True` removes at once.
* **Owner references**: when an object is removed, its dependents (objects naming its uid) are deleted too, at
  once, as the garbage collector does later for a real server: `propagation_policy` Background (default),
  Foreground (dependents first; the owner waits, marked with the `foregroundDeletion` finalizer, while one with
  blockOwnerDeletion remains) or Orphan (the dependents lose the reference and stay).
* **Watch** yields `Change`s in order: "" = changes from now, "0" = the current objects as ADDED first, a version
  = every change after it (the whole history is kept). Label and field selectors filter lists and watches.

Not modelled: kind-specific strategies (validation, project phases, node rules), authorization, schema checks of
`define`, paging tokens across writes (a page is a slice of one snapshot), bookmarks and Expired.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

from caravanserai import meta, v1
from caravanserai.client import Change, ObjectList
from caravanserai.clock import Clock, SystemClock, timestamp
from caravanserai.customkinds.schemas import register
from caravanserai.errors import AlreadyExists, Conflict, FieldViolation, Invalid, NotFound
from caravanserai.text.selectors import FieldSelector, LabelSelector, object_fields

T = TypeVar("T")


@dataclass(slots=True)
class _History:
    """Every change of every kind, in version order, and the futures of watchers waiting for the next one."""

    changes: list[tuple[int, str, str, Any]] = field(default_factory=list)  # version, resource, type, object
    waiters: set[asyncio.Future[None]] = field(default_factory=set)

    def wake(self) -> None:
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)
        self.waiters.clear()


class FakeClient:
    """In-memory stand-in for `caravanserai.client.Client` (resources only; see the module docstring)."""

    def __init__(self, *, clock: Clock | None = None, namespace: str = meta.DEFAULT_NAMESPACE) -> None:
        self.clock: Clock = clock or SystemClock()
        self.namespace = namespace  # where names without a namespace are looked up (as `Client.namespace`)
        self.target = "fake"
        self._version = 0
        self._objects: dict[str, dict[str, Any]] = {}  # resource → key → stored object
        self._history = _History()
        self.projects: FakeResourceClient[v1.Project] = FakeResourceClient(self, meta.kind_for("projects"))
        self.nodes: FakeResourceClient[v1.Node] = FakeResourceClient(self, meta.kind_for("nodes"))
        self.leases: FakeResourceClient[v1.Lease] = FakeResourceClient(self, meta.kind_for("leases"))
        self.events: FakeResourceClient[v1.Event] = FakeResourceClient(self, meta.kind_for("events"))
        self.resourcedefinitions: FakeResourceClient[v1.ResourceDefinition] = FakeResourceClient(
            self, meta.kind_for("resourcedefinitions")
        )
        self.secrets: FakeResourceClient[v1.Secret] = FakeResourceClient(self, meta.kind_for("secrets"))
        self.configs: FakeResourceClient[v1.Config] = FakeResourceClient(self, meta.kind_for("configs"))
        self.backuprepositories: FakeResourceClient[v1.BackupRepository] = FakeResourceClient(
            self, meta.kind_for("backuprepositories")
        )
        self.admissionpolicies: FakeResourceClient[v1.AdmissionPolicy] = FakeResourceClient(
            self, meta.kind_for("admissionpolicies")
        )
        self.nodegroups: FakeResourceClient[v1.NodeGroup] = FakeResourceClient(self, meta.kind_for("nodegroups"))
        self.projectsets: FakeResourceClient[v1.ProjectSet] = FakeResourceClient(self, meta.kind_for("projectsets"))
        self.namespaces: FakeResourceClient[v1.Namespace] = FakeResourceClient(self, meta.kind_for("namespaces"))

    @overload
    def resource(self, kind: str, *, namespace: str | None = None) -> FakeResourceClient[Any]: ...

    @overload
    def resource(self, kind: type[T], *, namespace: str | None = None) -> FakeResourceClient[T]: ...

    def resource(self, kind: str | type[T], *, namespace: str | None = None) -> FakeResourceClient[Any]:
        """The resource client of a kind, by message class or by name (as `Client.resource`)."""
        found = meta.kind_for(kind) if isinstance(kind, str) else meta.kind_of_class(kind)
        return FakeResourceClient(self, found, namespace=namespace)

    async def define(
        self,
        cls: type[T],
        *,
        spec: type[Any] | None = None,
        status: type[Any] | None = None,
        group: str,
        plural: str = "",
        short_names: Sequence[str] = (),
        printer_columns: Sequence[tuple[str, str]] = (),
        namespaced: bool = False,
        **_: Any,
    ) -> meta.Kind:
        """Register the custom kind of `cls` in this process (no definition object, no schema check)."""
        return register(
            cls,
            group=group,
            plural=plural,
            short_names=short_names,
            printer_columns=printer_columns,
            namespaced=namespaced,
        )

    async def discover(self) -> list[meta.Kind]:
        return []

    async def close(self) -> None:
        """Nothing to close; watches end when their consumer stops iterating."""

    async def __aenter__(self) -> FakeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def retry_pause(self, delay: float, *, clock: Clock | None = None) -> bool:
        """As `Client.retry_pause`: sleeps `delay` of the clock (a fake client never loses its connection)."""
        await (clock or self.clock).sleep(delay)
        return False

    def connected(self) -> bool:
        return True

    # ---- the store (used by FakeResourceClient) ----------------------------------------------------------------

    def stored(self, resource: str) -> dict[str, Any]:
        return self._objects.setdefault(resource, {})

    @property
    def version(self) -> int:
        """The version of the last write (the snapshot a list returns)."""
        return self._version

    def commit(self, resource: str, type_: str, obj: Any) -> Any:
        """Store (or, for DELETED, remove) `obj` at the next version and tell the watchers. Returns a copy."""
        self._version += 1
        obj.metadata.resource_version = str(self._version)
        objects = self.stored(resource)
        if type_ == "DELETED":
            objects.pop(meta.key_of(obj), None)
        else:
            objects[meta.key_of(obj)] = obj
        self._history.changes.append((self._version, resource, type_, meta.copy(obj)))
        self._history.wake()
        if type_ == "DELETED":
            self._collect_dependents(obj.metadata.uid)
        return meta.copy(obj)

    def dependents(self, owner_uid: str) -> list[tuple[str, Any]]:
        """(resource, stored object) of every object whose ownerReferences name `owner_uid`."""
        return [
            (resource, obj)
            for resource, objects in self._objects.items()
            for obj in objects.values()
            if any(ref.uid == owner_uid for ref in obj.metadata.owner_references)
        ]

    def _collect_dependents(self, owner_uid: str) -> None:
        """Remove what the removed object owned (Background propagation), finalizers respected; release owners
        waiting in Foreground deletion whose last blocking dependent this was."""
        for resource, obj in self.dependents(owner_uid):
            if resource in self._objects and meta.key_of(obj) in self._objects[resource]:
                self.remove_or_mark(resource, meta.copy(obj), force=False)
        for resource, objects in list(self._objects.items()):
            for owner in list(objects.values()):
                waiting = meta.FINALIZER_FOREGROUND in owner.metadata.finalizers
                if waiting and not self._blocking(owner.metadata.uid):
                    released = meta.copy(owner)
                    released.metadata.finalizers.remove(meta.FINALIZER_FOREGROUND)
                    kind = "MODIFIED" if released.metadata.finalizers else "DELETED"
                    self.commit(resource, kind, released)

    def _blocking(self, owner_uid: str) -> bool:
        return any(
            ref.uid == owner_uid and ref.block_owner_deletion
            for _, obj in self.dependents(owner_uid)
            for ref in obj.metadata.owner_references
        )

    def remove_or_mark(self, resource: str, obj: Any, *, force: bool, policy: str = "") -> tuple[Any, bool]:
        """Delete `obj` (a copy of the stored one) under propagation `policy`: removed, or marked when finalizers
        remain (Foreground: while dependents with blockOwnerDeletion remain, after their deletion)."""
        if policy == meta.PROPAGATION_ORPHAN:
            self._orphan(obj.metadata.uid)
        elif policy == meta.PROPAGATION_FOREGROUND:
            for dep_resource, dep in self.dependents(obj.metadata.uid):
                self.remove_or_mark(dep_resource, meta.copy(dep), force=False, policy=policy)
            if self._blocking(obj.metadata.uid) and meta.FINALIZER_FOREGROUND not in obj.metadata.finalizers:
                obj.metadata.finalizers.append(meta.FINALIZER_FOREGROUND)
        if obj.metadata.finalizers and not force:
            if obj.metadata.HasField("deletion_timestamp") and obj == self.stored(resource).get(meta.key_of(obj)):
                return obj, False
            if not obj.metadata.HasField("deletion_timestamp"):
                obj.metadata.deletion_timestamp.CopyFrom(timestamp(self.clock.now()))
            return self.commit(resource, "MODIFIED", obj), False
        return self.commit(resource, "DELETED", obj), True

    def _orphan(self, owner_uid: str) -> None:
        for resource, dep in self.dependents(owner_uid):
            kept = meta.copy(dep)
            refs = [ref for ref in kept.metadata.owner_references if ref.uid != owner_uid]
            del kept.metadata.owner_references[:]
            kept.metadata.owner_references.extend(refs)
            self.commit(resource, "MODIFIED", kept)

    def changes_after(self, version: int) -> list[tuple[int, str, str, Any]]:
        return [c for c in self._history.changes if c[0] > version]

    async def wait_for_change(self, version: int) -> None:
        """Return once a change after `version` exists."""
        while self._version <= version:
            waiter = asyncio.get_running_loop().create_future()
            self._history.waiters.add(waiter)
            try:
                await waiter
            finally:
                self._history.waiters.discard(waiter)


class FakeResourceClient(Generic[T]):
    """The verbs of one kind on a `FakeClient`, with `ResourceClient`'s signatures and namespaces. Objects returned
    are copies. A namespace need not exist (there are no Namespace rules here)."""

    def __init__(self, client: FakeClient, kind: meta.Kind, *, namespace: str | None = None) -> None:
        self._client = client
        self.kind = kind
        self.resource = kind.plural
        self.namespace = None if kind.cluster_scoped else namespace

    def in_namespace(self, namespace: str) -> FakeResourceClient[T]:
        return FakeResourceClient(self._client, self.kind, namespace=namespace)

    def _key(self, name: str) -> str:
        """The key of a name or key, as `ResourceClient` locates it."""
        if self.kind.cluster_scoped:
            return name
        namespace, name = meta.split_key(name)
        return meta.join_key(namespace or self.namespace or self._client.namespace, name)

    def _in_scope(self, namespace: str | None) -> Callable[[Any], bool]:
        wanted = "" if self.kind.cluster_scoped else (namespace if namespace is not None else self.namespace or "")
        return lambda obj: not wanted or obj.metadata.namespace == wanted

    @property
    def client(self) -> FakeClient:
        return self._client

    def _objects(self) -> dict[str, Any]:
        return self._client.stored(self.resource)

    def _what(self, name: str) -> str:
        return f"{self.kind.kind} {name}"

    def _current(self, name: str, expected: str) -> Any:
        name = self._key(name)
        current = self._objects().get(name)
        if current is None:
            raise NotFound(f"{self.resource} {name!r} not found")
        if expected and current.metadata.resource_version != expected:
            raise Conflict.modified(self._what(name), expected=expected, current=current.metadata.resource_version)
        return meta.copy(current)

    def _require_version(self, obj: Any) -> None:
        if not obj.metadata.resource_version:
            violation = FieldViolation("metadata.resourceVersion", "required: pass the version you read")
            raise Invalid.of([violation], what=self.kind.kind)

    async def create(self, obj: T) -> T:
        """As `ResourceClient.create` (see the module docstring for the rules kept)."""
        new: Any = meta.copy(obj)  # type: ignore[type-var]  # every kind's class is a protobuf Message
        violations = []
        if not new.metadata.name:
            violations.append(FieldViolation("metadata.name", "required"))
        if new.metadata.resource_version:
            violations.append(FieldViolation("metadata.resourceVersion", "must not be set on create"))
        if new.metadata.HasField("deletion_timestamp"):
            violations.append(FieldViolation("metadata.deletionTimestamp", "must not be set on create"))
        if self.kind.cluster_scoped and new.metadata.namespace:
            violations.append(
                FieldViolation("metadata.namespace", f"must be empty: a {self.kind.kind} is cluster-wide")
            )
        if violations:
            raise Invalid.of(violations, what=self.kind.kind)
        if not self.kind.cluster_scoped:
            new.metadata.namespace = new.metadata.namespace or self.namespace or self._client.namespace
        if meta.key_of(new) in self._objects():
            raise AlreadyExists(f"{self.kind.kind} {new.metadata.name} already exists")
        new.api_version, new.kind = self.kind.api_version, self.kind.kind
        new.metadata.uid = new.metadata.uid or str(uuid.uuid4())
        new.metadata.generation = 1
        new.spec.SetInParent()  # present, even empty: an update copying an empty spec changes nothing
        new.status.SetInParent()
        new.metadata.creation_timestamp.CopyFrom(timestamp(self._client.clock.now()))
        stored: T = self._client.commit(self.resource, "ADDED", new)
        return stored

    async def get(self, name: str) -> T:
        obj: T = self._current(name, "")
        return obj

    async def list(
        self,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
        namespace: str | None = None,
    ) -> ObjectList[T]:
        matches, scope = _matcher(self.kind, label_selector, field_selector), self._in_scope(namespace)
        items = [meta.copy(o) for _, o in sorted(self._objects().items()) if scope(o) and matches(o)]
        start = int(continue_token or 0)
        page = items[start : start + limit] if limit else items[start:]
        more = bool(limit) and start + limit < len(items)
        return ObjectList(page, str(self._client.version), str(start + limit) if more else "")

    def _key_of(self, obj: Any) -> str:
        return self._key(meta.join_key(obj.metadata.namespace, obj.metadata.name))

    async def update(self, obj: T) -> T:
        """As `ResourceClient.update`: metadata (labels, annotations, finalizers) and spec; CAS on the version."""
        new: Any = obj
        self._require_version(new)
        old = self._current(self._key_of(new), new.metadata.resource_version)
        merged = meta.copy(old)
        merged.spec.CopyFrom(new.spec)
        for field_name in ("labels", "annotations"):
            getattr(merged.metadata, field_name).clear()
            getattr(merged.metadata, field_name).update(getattr(new.metadata, field_name))
        del merged.metadata.finalizers[:]
        merged.metadata.finalizers.extend(new.metadata.finalizers)
        del merged.metadata.owner_references[:]
        merged.metadata.owner_references.extend(new.metadata.owner_references)
        if merged.spec != old.spec:
            merged.metadata.generation = old.metadata.generation + 1
        if merged == old:
            return old  # type: ignore[no-any-return]  # the stored object, of the resource's class T
        if merged.metadata.HasField("deletion_timestamp") and not merged.metadata.finalizers:
            self._client.commit(self.resource, "DELETED", merged)
            return merged  # type: ignore[no-any-return]  # a copy of the stored object, of class T
        stored: T = self._client.commit(self.resource, "MODIFIED", merged)
        return stored

    async def update_status(self, obj: T) -> T:
        """As `ResourceClient.update_status`: only the status; CAS on the version."""
        new: Any = obj
        self._require_version(new)
        old = self._current(self._key_of(new), new.metadata.resource_version)
        merged = meta.copy(old)
        merged.status.CopyFrom(new.status)
        if merged == old:
            return old  # type: ignore[no-any-return]  # the stored object, of the resource's class T
        stored: T = self._client.commit(self.resource, "MODIFIED", merged)
        return stored

    async def delete(
        self, name: str, *, force: bool = False, resource_version: str = "", propagation_policy: str = ""
    ) -> v1.DeleteResponse:
        """As `ResourceClient.delete`: removed at once, or marked while finalizers remain; dependents go with it
        (Background, the default), before it (Foreground) or stay without the reference (Orphan)."""
        if propagation_policy not in ("", *meta.PROPAGATION_POLICIES):
            allowed = ", ".join(meta.PROPAGATION_POLICIES)
            violation = FieldViolation("propagationPolicy", f"must be one of {allowed}, not {propagation_policy!r}")
            raise Invalid.of([violation], what=self.kind.kind)
        current = self._current(name, resource_version)
        obj, deleted = self._client.remove_or_mark(self.resource, current, force=force, policy=propagation_policy)
        return v1.DeleteResponse(object=self.kind.wrap(obj), deleted=deleted)

    async def watch(
        self,
        *,
        resource_version: str = "",
        label_selector: str = "",
        field_selector: str = "",
        allow_bookmarks: bool = True,
        namespace: str | None = None,
    ) -> AsyncIterator[Change[T]]:
        """Changes after `resource_version` ("" = from now, "0" = the current objects as ADDED first), in order;
        runs until the consumer stops."""
        selected, scope = _matcher(self.kind, label_selector, field_selector), self._in_scope(namespace)

        def matches(obj: Any) -> bool:
            return scope(obj) and selected(obj)

        if resource_version == "0":
            after = self._client.version
            for obj in [meta.copy(o) for _, o in sorted(self._objects().items())]:
                if matches(obj):
                    yield Change("ADDED", obj)
        else:
            after = int(resource_version) if resource_version else self._client.version
        while True:
            for version, resource, type_, obj in self._client.changes_after(after):
                after = version
                if resource == self.resource and matches(obj):
                    yield Change(type_, meta.copy(obj))
            await self._client.wait_for_change(after)


def _matcher(kind: meta.Kind, label_selector: str, field_selector: str) -> Callable[[Any], bool]:
    labels = LabelSelector.parse(label_selector)
    fields = FieldSelector.parse(field_selector, kind=kind.kind)

    def matches(obj: Any) -> bool:
        return labels.matches(obj.metadata.labels) and fields.matches(object_fields(obj))

    return matches


__all__ = ["FakeClient", "FakeResourceClient"]
