"""Replies assembled from stored bytes: an object as etcd holds it becomes its wire form without being decoded.

Protobuf lets a message be built by concatenation: a length-delimited field is its tag, its length and its bytes,
and a sub-message field that occurs twice is merged (its scalar fields: the last occurrence wins). So:

* **Versioned.** `versioned(cls, value, revision)` is the stored `value` followed by a `metadata` holding only
  `resource_version`: it decodes to exactly `codec.decode(cls, value, revision)` (the stored value carries no
  version; a second suffix overrides the first), and it is what the watch cache keeps per object.
* **Wrapped.** `envelope(kind, blob)` is the serialized `v1.Object` holding the object `blob` (a built-in kind's
  own field; a custom kind's `CustomObject`), `watch_event` the serialized `v1.WatchEvent`, `list_item` one
  `ListResponse.items` entry: a list reply is the concatenation of its items and its trailer (`list_trailer`).

The bytes differ from a deterministic serialization of the decoded message (fields out of order, `metadata`
twice) but decode to the equal message; nothing compares serialized replies.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

from caravanserai import meta, v1

_LEN = 2  # wire type of a length-delimited field
_BYTES = [bytes((i,)) for i in range(0x80)]


def _varint(value: int) -> bytes:
    if value < 0x80:  # the lengths of versions and tags: one byte
        return _BYTES[value]
    if value < 0x4000:  # most objects: two bytes
        return bytes((value & 0x7F | 0x80, value >> 7))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(number: int) -> bytes:
    return _varint(number << 3 | _LEN)


def _field(tag: bytes, data: bytes) -> bytes:
    return b"".join((tag, _varint(len(data)), data))


# By message class (custom kinds get new classes when redefined): (metadata's tag, its resource_version's tag).
_VERSION_TAGS: weakref.WeakKeyDictionary[type[Any], tuple[bytes, bytes]] = weakref.WeakKeyDictionary()


def _version_tags(cls: type[Any]) -> tuple[bytes, bytes]:
    """The tags of `metadata` in `cls` and of `resource_version` in its metadata message."""
    tags = _VERSION_TAGS.get(cls)
    if tags is None:
        metadata = cls.DESCRIPTOR.fields_by_name["metadata"]
        tags = _tag(metadata.number), _tag(metadata.message_type.fields_by_name["resource_version"].number)
        _VERSION_TAGS[cls] = tags
    return tags


def versioned(cls: type[Any], value: bytes, revision: int) -> bytes:
    """`value` (stored bytes of a `cls`) with its resource version `revision` (0: left as it is)."""
    if not revision:
        return value
    outer, inner = _version_tags(cls)
    version = str(revision).encode()  # at most 19 digits: every length below is one byte
    return b"".join((value, outer, _BYTES[len(inner) + 1 + len(version)], inner, _BYTES[len(version)], version))


@functools.lru_cache(maxsize=64)
def _object_tag(field: str) -> bytes:
    return _tag(v1.Object.DESCRIPTOR.fields_by_name[field].number)


def envelope(kind: meta.Kind, blob: bytes) -> bytes:
    """The serialized `v1.Object` holding the object of `kind` serialized as `blob`."""
    if kind.custom:
        custom = v1.CustomObject(api_version=kind.api_version, kind=kind.kind, object=blob)
        return v1.Object(custom=custom).SerializeToString()
    return _field(_object_tag(kind.field), blob)


_EVENT_TYPES = {t: v1.WatchEvent(type=t).SerializeToString() for t in (v1.ADDED, v1.MODIFIED, v1.DELETED)}
_EVENT_OBJECT = _tag(v1.WatchEvent.DESCRIPTOR.fields_by_name["object"].number)
_LIST_ITEM = _tag(v1.ListResponse.DESCRIPTOR.fields_by_name["items"].number)


def watch_event(type_: str, kind: meta.Kind, blob: bytes) -> bytes:
    """The serialized `v1.WatchEvent` of `type_` (ADDED, MODIFIED, DELETED) for the object serialized as `blob`."""
    return _EVENT_TYPES[type_] + _field(_EVENT_OBJECT, envelope(kind, blob))


def list_item(kind: meta.Kind, blob: bytes) -> bytes:
    """One entry of `ListResponse.items` holding the object serialized as `blob`."""
    if kind.custom:
        return _field(_LIST_ITEM, envelope(kind, blob))
    tag, size = _object_tag(kind.field), _varint(len(blob))
    return b"".join((_LIST_ITEM, _varint(len(tag) + len(size) + len(blob)), tag, size, blob))


def list_trailer(resource_version: str, token: str) -> bytes:
    """The fields of a `ListResponse` after its items: its resource version and continue token."""
    trailer = v1.ListResponse(resource_version=resource_version)
    setattr(trailer, "continue", token)
    return trailer.SerializeToString()


__all__ = ["envelope", "list_item", "list_trailer", "versioned", "watch_event"]
