"""The informer's cache: the objects of one kind by key (`meta.key_of`: "namespace/name", or the name of a
cluster-wide object), with secondary indexes.

Guarantees:

* **Read-only for everyone but the informer.** `get`, `list` and `by_index` return the cached messages
  themselves, not copies (copying every read would dominate a controller's CPU). Never change them: copy with
  `caravanserai.meta.copy` first. The mutation detector (`caravanserai.informer.mutation`) catches offenders in
  tests.
* **Indexes agree with the objects.** Every write updates the object and all of its index entries in one
  synchronous step, so a reader on the same event loop never sees one without the other.
* **Readers get snapshots of membership.** `list`, `keys` and `by_index` return new lists, sorted by name; holding
  one across an `await` is safe (the objects in it may meanwhile be replaced in the cache, never changed).
* **Compact storage, same reads.** With `compact=cls` the cache keeps each object serialized (a few times smaller
  than a decoded message) and decodes it on every read, so readers get a fresh message each time (still never
  to be changed); indexes, ordering and the mutation detector work the same (the detector then checks the last
  message handed out for each name).
* **Index functions are pure.** An `IndexFunc` maps an object to the values it is filed under (none, one or
  many). It is called again on the old object when that object is replaced or deleted, so it must depend on the
  object only.

Indexes every informer has: `LABEL_INDEX` ("labels", values `key=value`). Ready-made ones to add:
`NODE_REF_INDEX` ("status.nodeRef": the node a project is bound to) and `PHASE_INDEX` ("status.phase").
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from caravanserai.informer.mutation import MutationDetector

T = TypeVar("T")

IndexFunc = Callable[[Any], Iterable[str]]

LABEL_INDEX = "labels"
NODE_REF_INDEX = "status.nodeRef"
PHASE_INDEX = "status.phase"


def label_index(obj: Any) -> builtins.list[str]:
    """`key=value` for every label of `obj`: `by_index(LABEL_INDEX, "app=web")`."""
    return [f"{key}={value}" for key, value in obj.metadata.labels.items()]


def node_ref_index(obj: Any) -> builtins.list[str]:
    """The node a project is bound to (`status.node_ref`); nothing for unbound projects and other kinds."""
    status = getattr(obj, "status", None)
    node = getattr(status, "node_ref", "")
    return [node] if node else []


def phase_index(obj: Any) -> builtins.list[str]:
    """A project's phase (`status.phase`); nothing for other kinds."""
    status = getattr(obj, "status", None)
    phase = getattr(status, "phase", "")
    return [phase] if phase else []


DEFAULT_INDEXERS: Mapping[str, IndexFunc] = {LABEL_INDEX: label_index}
NODE_REF_INDEXERS: Mapping[str, IndexFunc] = {NODE_REF_INDEX: node_ref_index}
PHASE_INDEXERS: Mapping[str, IndexFunc] = {PHASE_INDEX: phase_index}


class CacheReader(Protocol[T]):
    """What controllers may do with an informer's cache: read."""

    def get(self, name: str) -> T | None:
        """The cached object of key `name` ("namespace/name" for a namespaced kind), or None."""
        ...

    def list(self) -> builtins.list[T]:
        """Every cached object, sorted by name."""
        ...

    def keys(self) -> builtins.list[str]:
        """Every cached key, sorted."""
        ...

    def by_index(self, index: str, value: str) -> builtins.list[T]:
        """The objects filed under `value` in `index`, sorted by name. KeyError for an unknown index."""
        ...

    def keys_by_index(self, index: str, value: str) -> builtins.list[str]:
        """The keys of the objects filed under `value` in `index`, sorted, without reading the objects (a compact
        cache decodes each object it hands out). KeyError for an unknown index."""
        ...

    def __len__(self) -> int: ...

    def __contains__(self, name: object) -> bool: ...


class Indexer(Generic[T]):
    """An indexed in-memory store of objects by name. The informer writes; everyone else reads (`CacheReader`)."""

    def __init__(
        self,
        indexers: Mapping[str, IndexFunc] | None = None,
        *,
        detector: MutationDetector | None = None,
        compact: type[T] | None = None,
    ) -> None:
        # The objects, by name. Each is read-only once stored here. Compact: their serialized form instead.
        self._items: dict[str, T] = {}
        self._blobs: dict[str, bytes] = {}
        self._versions: dict[str, str] = {}  # compact: name → resource version (the informer's echo check)
        self._cls = compact
        # Compact with the detector on: the last message handed out per name (checked like stored objects).
        self._handed: dict[str, T] = {}
        self._indexers: dict[str, IndexFunc] = {}
        # index name → value → names filed under it. Invariant: for every stored object and every index, the
        # object's name is in exactly the buckets its IndexFunc returns; empty buckets are removed.
        self._indices: dict[str, dict[str, set[str]]] = {}
        self._detector = detector or MutationDetector(enabled=False)
        self.add_indexers({**DEFAULT_INDEXERS, **(indexers or {})})

    @property
    def detector(self) -> MutationDetector:
        return self._detector

    @property
    def index_names(self) -> builtins.list[str]:
        return sorted(self._indexers)

    # ---- reading ----------------------------------------------------------------------------------------------

    def get(self, name: str) -> T | None:
        return self._load(name) if name in self else None

    def list(self) -> builtins.list[T]:
        return [self._load(name) for name in self.keys()]

    def keys(self) -> builtins.list[str]:
        return sorted(self._blobs if self._cls is not None else self._items)

    def by_index(self, index: str, value: str) -> builtins.list[T]:
        return [self._load(name) for name in self.keys_by_index(index, value)]

    def keys_by_index(self, index: str, value: str) -> builtins.list[str]:
        try:
            buckets = self._indices[index]
        except KeyError:
            raise KeyError(f"no index {index!r}; known: {', '.join(self.index_names)}") from None
        return sorted(buckets.get(value, ()))

    def index_values(self, index: str) -> builtins.list[str]:
        """The values under which at least one object is filed in `index`, sorted."""
        return sorted(self._indices[index])

    def __len__(self) -> int:
        return len(self._blobs if self._cls is not None else self._items)

    def __contains__(self, name: object) -> bool:
        return name in (self._blobs if self._cls is not None else self._items)

    def version(self, name: str) -> str | None:
        """The resource version of the object under `name` (None if absent), without decoding it."""
        if self._cls is not None:
            return self._versions.get(name)
        obj: Any = self._items.get(name)
        return None if obj is None else str(obj.metadata.resource_version)

    def holds(self, name: str, obj: object) -> bool:
        """Whether `obj` is the very message this cache handed out for `name` (compact: the last one, tracked
        with the detector on only)."""
        if self._cls is None:
            return self._items.get(name) is obj
        return self._handed.get(name) is obj

    def _load(self, name: str) -> T:
        """The object stored under `name` (present): itself, or compact, decoded afresh."""
        if self._cls is None:
            return self._items[name]
        obj: T = self._cls.FromString(self._blobs[name])  # type: ignore[attr-defined]  # T is unbounded; compact storage is given message classes only
        if self._detector.enabled:
            self._handed[name] = obj
        return obj

    def _stored(self, name: str) -> T | None:
        """For replacing or deleting: the object under `name` as the detector must check it (compact: the last
        one handed out, else a decoded copy), or None."""
        if self._cls is None:
            return self._items.get(name)
        if name not in self._blobs:
            return None
        handed = self._handed.pop(name, None)
        return handed if handed is not None else self._load(name)

    # ---- writing (the informer only) ---------------------------------------------------------------------------

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indexes and file the objects already stored. Re-adding an index with the same function is a no-op;
        a different function under a taken name is a ValueError."""
        for name, func in indexers.items():
            existing = self._indexers.get(name)
            if existing is func:
                continue
            if existing is not None:
                raise ValueError(f"index {name!r} already exists with a different function")
            self._indexers[name] = func
            buckets: dict[str, set[str]] = {}
            for key in self.keys():
                for value in func(self._load(key)):
                    buckets.setdefault(value, set()).add(key)
            self._indices[name] = buckets

    def upsert(self, name: str, obj: T) -> T | None:
        """Store `obj` under `name`; return the object it replaces (None if new).

        With the mutation detector on, the replaced object is first checked against its recorded copy.
        """
        old = self._stored(name)
        if old is not None:
            self._detector.check(name, old)
            self._unfile(name, old)
        if self._cls is None:
            self._items[name] = obj
        else:
            self._blobs[name] = obj.SerializeToString(deterministic=True)  # type: ignore[attr-defined]  # T is unbounded; compact storage is given message classes only
            self._versions[name] = obj.metadata.resource_version  # type: ignore[attr-defined]  # T is unbounded; every kind's message has metadata
            if self._detector.enabled:
                self._handed[name] = obj  # what the informer hands to its event handlers
        self._file(name, obj)
        self._detector.record(name, obj)
        return old

    def delete(self, name: str) -> T | None:
        """Remove the object under `name`; return it (None if absent)."""
        old = self._stored(name)
        self._items.pop(name, None)
        self._blobs.pop(name, None)
        self._versions.pop(name, None)
        if old is not None:
            self._detector.check(name, old)
            self._unfile(name, old)
            self._detector.forget(name)
        return old

    def check_mutations(self) -> None:
        """Raise CacheMutationError if any cached object changed since it was stored (detector on only)."""
        self._detector.check_all(self._items if self._cls is None else self._handed)

    def _file(self, name: str, obj: T) -> None:
        for index, func in self._indexers.items():
            buckets = self._indices[index]
            for value in func(obj):
                bucket = buckets.get(value)
                if bucket is None:
                    buckets[value] = {name}
                else:
                    bucket.add(name)

    def _unfile(self, name: str, obj: T) -> None:
        for index, func in self._indexers.items():
            buckets = self._indices[index]
            for value in func(obj):
                bucket = buckets.get(value)
                if bucket is not None:
                    bucket.discard(name)
                    if not bucket:
                        del buckets[value]


__all__ = [
    "CacheReader",
    "DEFAULT_INDEXERS",
    "IndexFunc",
    "Indexer",
    "LABEL_INDEX",
    "NODE_REF_INDEX",
    "NODE_REF_INDEXERS",
    "PHASE_INDEX",
    "PHASE_INDEXERS",
    "label_index",
    "node_ref_index",
    "phase_index",
]
