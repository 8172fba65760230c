"""The current objects of one watch cache, by key: each held once, as bytes, decoded on read.

* **Compact.** Each object is kept as its stored etcd value followed by its resource version
  (`storedbytes.versioned`): a few times smaller than the decoded message, and already the wire form that watch
  events and replies are assembled from. A read decodes it afresh (`cls.FromString`), equal to what
  `codec.decode` gives for the stored value at that revision.
* **Decoded too, when asked** (`decoded=True`, for the few kinds the apiserver reads on its request paths:
  quotas, namespaces, roles, policies, definitions): the decoded message is kept beside the bytes and every read
  returns that same message. Either way a read is read-only to its caller (copy before changing anything).
* **Indexed by a selectable field on demand.** `keys_where(field, value)` gives the keys of the objects whose
  `field` (as `text.selectors.object_fields` reads it) equals `value`. The first call for a field builds its index
  in one pass; from then on every change keeps it current (decoding the changed object once), so a reader that
  wants the objects of one node does not decode every object.
* A `Mapping`: `in`, `len` and iteration read keys only; `values()` and `items()` decode each object.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from caravanserai.text.selectors import object_fields


class CompactObjects(Mapping[str, Any]):
    """Objects of one message class by key, held as versioned stored bytes (`blob`)."""

    def __init__(self, cls: type[Any], *, decoded: bool = False) -> None:
        self._cls = cls
        self._blobs: dict[str, bytes] = {}
        self._decoded: dict[str, Any] | None = {} if decoded else None  # key → the same decoded message
        self._index: dict[str, dict[str, set[str]]] = {}  # field → value → keys
        self._indexed: dict[str, dict[str, str]] = {}  # field → key → value (to unfile on change)

    # ---- reading --------------------------------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        return self._object(key, self._blobs[key])

    def get(self, key: str, default: Any = None) -> Any:
        blob = self._blobs.get(key)
        return default if blob is None else self._object(key, blob)

    def __contains__(self, key: object) -> bool:
        return key in self._blobs

    def __iter__(self) -> Iterator[str]:
        return iter(self._blobs)

    def __len__(self) -> int:
        return len(self._blobs)

    def blob(self, key: str) -> bytes | None:
        """The object at `key` as versioned stored bytes (never decoded)."""
        return self._blobs.get(key)

    def blobs(self) -> list[tuple[str, bytes]]:
        """Every (key, versioned stored bytes), a snapshot."""
        return list(self._blobs.items())

    def keys_where(self, field: str, value: str) -> frozenset[str]:
        """The keys of the objects whose selectable `field` equals `value` (the index of `field` is built on the
        first call and kept from then on)."""
        if field not in self._index:
            self._index[field], self._indexed[field] = {}, {}
            for key, blob in self._blobs.items():
                self._file(key, self._object(key, blob))
        return frozenset(self._index[field].get(value, ()))

    # ---- changing -----------------------------------------------------------------------------------------------

    def put(self, key: str, blob: bytes) -> None:
        """Hold `blob` (versioned stored bytes) at `key`, replacing what was there."""
        self._blobs[key] = blob
        if self._decoded is None and not self._index:
            return
        obj = self._cls.FromString(blob)
        if self._decoded is not None:
            self._decoded[key] = obj
        self._file(key, obj)

    def remove(self, key: str) -> None:
        """Forget the object at `key` (if held)."""
        if self._blobs.pop(key, None) is None:
            return
        if self._decoded is not None:
            self._decoded.pop(key, None)
        for field, values in self._indexed.items():
            self._unfile(field, key, values.pop(key, None))

    def replace(self, blobs: dict[str, bytes]) -> None:
        """Hold exactly `blobs` (a relist); indexes and decoded messages follow."""
        self._blobs = blobs
        if self._decoded is not None:
            self._decoded = {key: self._cls.FromString(blob) for key, blob in blobs.items()}
        fields = list(self._index)
        self._index, self._indexed = {}, {}
        for field in fields:
            self.keys_where(field, "")

    def reclass(self, cls: type[Any]) -> None:
        """Decode with `cls` from now on (a compatible re-definition of a custom kind: the bytes read alike)."""
        self._cls = cls
        if self._decoded is not None:
            self._decoded = {key: cls.FromString(blob) for key, blob in self._blobs.items()}

    def _object(self, key: str, blob: bytes) -> Any:
        return self._decoded[key] if self._decoded is not None else self._cls.FromString(blob)

    def _file(self, key: str, obj: Any) -> None:
        if not self._index:
            return
        fields = object_fields(obj)
        for field, values in self._indexed.items():
            value = fields.get(field, "")
            old = values.get(key)
            if old == value:
                continue
            self._unfile(field, key, old)
            values[key] = value
            self._index[field].setdefault(value, set()).add(key)

    def _unfile(self, field: str, key: str, value: str | None) -> None:
        if value is None:
            return
        keys = self._index[field].get(value)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._index[field][value]


__all__ = ["CompactObjects"]
