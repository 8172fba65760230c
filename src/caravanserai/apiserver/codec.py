"""The stored form of an object: the one place that turns objects into etcd values and back.

Guarantees:

* The stored value is the deterministic protobuf serialization of the object **without** its resource_version:
  the version is etcd's `mod_revision` of the key, put back on every decode. A stored value never goes stale.
* `encode` refuses (Invalid, field `object`) anything larger than `MAX_OBJECT_BYTES`, so every stored object can
  be returned in one gRPC message.
"""

from __future__ import annotations

from typing import Any

from caravanserai.errors import FieldViolation, Invalid

MAX_OBJECT_BYTES = 1024 * 1024


def encode(obj: Any) -> bytes:
    """The stored bytes of `obj`. `obj` must be the caller's own message (never a cached one): the version is
    cleared for serializing and put back."""
    version = obj.metadata.resource_version
    obj.metadata.resource_version = ""
    try:
        data: bytes = obj.SerializeToString(deterministic=True)
    finally:
        obj.metadata.resource_version = version
    if len(data) > MAX_OBJECT_BYTES:
        raise Invalid.of(
            [FieldViolation("object", f"is {len(data)} bytes serialized; at most {MAX_OBJECT_BYTES} allowed")]
        )
    return data


def decode(cls: type[Any], value: bytes, mod_revision: int) -> Any:
    """The object stored as `value` at `mod_revision` (0: leave resource_version empty, e.g. a previous value whose
    revision is unknown)."""
    obj = cls.FromString(value)
    if mod_revision:
        obj.metadata.resource_version = str(mod_revision)
    return obj


__all__ = ["MAX_OBJECT_BYTES", "decode", "encode"]
