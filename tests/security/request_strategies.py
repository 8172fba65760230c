"""Hypothesis strategies for raw requests to the methods of `caravanserai.v1.Resources`.

`request_batches(size)` draws requests (a method and a body) of three origins:

* **formed**: a request message whose fields hold random values of the right type, drawn from pools of
  interesting values per field (seeded object names, phases, selectors, continue tokens, boundary integers and
  timestamps, odd text); for Create, Update and UpdateStatus often a valid object (see `strategies`) with random
  fields added. Some Update, UpdateStatus and Delete requests ask the harness to fill in the stored
  resource_version first (`current_version`), so that they reach the phase table and the writes.
* **mutated**: a formed request's bytes with bits flipped, bytes inserted, removed, cut off, made invalid UTF-8,
  or the message repeated (which protobuf merges), sometimes sent to another method.
* **random**: random bytes.
"""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st
from strategies import (
    BAD_LABEL_KEYS,
    BAD_QUANTITIES,
    LABEL_KEYS,
    LABEL_VALUES,
    TEXT,
    Draw,
    dns_labels,
    dns_subdomains,
    valid_nodes,
    valid_projects,
)

from caravanserai import meta, v1

RESOURCES = ["projects", "nodes", "leases", "events"]
SEEDS: dict[str, list[str]] = {
    "projects": ["seed-p0", "seed-p1", "seed-p2"],
    "nodes": ["seed-n0", "seed-n1"],
    "leases": ["seed-l0"],
    "events": ["seed-e0"],
}
REQUEST_TYPES: dict[str, type[Message]] = {
    "Create": v1.CreateRequest,
    "Get": v1.GetRequest,
    "List": v1.ListRequest,
    "Update": v1.UpdateRequest,
    "UpdateStatus": v1.UpdateRequest,
    "Delete": v1.DeleteRequest,
    "Watch": v1.WatchRequest,
}


@dataclass(frozen=True)
class RawRequest:
    """What to send: `body` to `method`; `message` is the request before serialization (formed ones only)."""

    method: str
    body: bytes
    origin: str  # "formed", "mutated" or "random"
    message: Message | None = None
    current_version: bool = False  # the harness sets the stored resource_version before sending


def _token(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


_SEED_NAMES = [name for names in SEEDS.values() for name in names]
_QUANTITIES = st.one_of(st.sampled_from(["1", "500m", "2Gi", "0", "1e3"]), BAD_QUANTITIES)
_SELECTORS = st.one_of(
    TEXT,
    st.sampled_from(
        [
            "",
            "a=b",
            "a==b",
            "a!=b",
            "a in (x, y)",
            "a notin (x)",
            "a",
            "!a",
            "a in (",
            "=",
            "a=b,",
            ",",
            "a b",
            "x" * 300 + "=1",
            "status.phase=Pending",
            "status.nodeRef=seed-n0",
            "metadata.name=seed-p0",
            "metadata.name!=x",
            "spec.x=1",
            "status.phase in (Pending)",
            "metadata.name==",
            "=x",
            "a=" + "b" * 70_000,
        ]
    ),
)
_CONTINUE = st.one_of(
    TEXT,
    st.sampled_from(
        [
            "",
            "e30=",
            "bm90IGpzb24=",
            "%%%",
            _token([1]),
            _token({"rv": "1", "after": None}),
            _token({"rv": 1.5, "after": ""}),
            _token({"rv": True, "after": "x"}),
            base64.urlsafe_b64encode(b'{"rv": 1, "after": "\\ud800"}').decode(),
        ]
    ),
    st.builds(
        lambda rv, after: _token({"rv": rv, "after": after}),
        st.one_of(st.integers(-2, 50), st.sampled_from([10**6, 2**63 - 1, 2**63, 10**30, -(2**63)])),
        st.one_of(st.sampled_from(["", "seed-p0", "a/b", "\x00"]), TEXT),
    ),
)
_STRINGS: dict[str, st.SearchStrategy[str]] = {
    "resource": st.one_of(
        st.sampled_from(RESOURCES * 4 + ["project", "Projects", "", "pods", "projects/x", ".."]), TEXT
    ),
    "name": st.one_of(
        st.sampled_from([*_SEED_NAMES, "", "a/b", "..", ".", "x" * 20000, "UPPER", "n.example.com"]),
        dns_labels(),
        TEXT,
    ),
    "resourceVersion": st.one_of(
        st.sampled_from(["", "0", "1", "2", "-1", "abc", "1e3", " 7", "9" * 30, "9" * 5000, "99999999", "٣"]),
        st.integers(0, 10_000).map(str),
    ),
    "labelSelector": _SELECTORS,
    "fieldSelector": _SELECTORS,
    "continue": _CONTINUE,
    "phase": st.sampled_from([*v1.PHASES, "", "running", "Unknown"]),
    "state": st.sampled_from([*v1.NODE_STATES, "", "Gone"]),
    "nodeRef": st.sampled_from(["seed-n0", "seed-n1", "", "Bad_Node", "missing-node"]),
    "status": st.sampled_from(["True", "False", "Unknown", "", "Maybe"]),
    "type": st.sampled_from(
        ["Ready", "Phase", "Scheduled", "", "Normal", "Warning", "InternalIP", "Persistent", "Bogus"]
    ),
    "apiVersion": st.sampled_from(["", v1.API_VERSION, "caravanserai/v2"]),
    "kind": st.sampled_from(["", "Project", "Node", "Lease", "Event", "Pod"]),
    "image": st.sampled_from(["busybox:test", "", "has space", "x" * 70_000]),
    "download": _QUANTITIES,
    "upload": _QUANTITIES,
}
_GENERIC_STRINGS = st.one_of(TEXT, dns_subdomains(), st.sampled_from(["/data", "data", "TCP", "UDP", "Always"]))
_MAP_KEYS = st.one_of(LABEL_KEYS, BAD_LABEL_KEYS, TEXT)
_MAP_VALUES: dict[str, st.SearchStrategy[str]] = {
    "requests": _QUANTITIES,
    "limits": _QUANTITIES,
    "capacity": _QUANTITIES,
    "allocatable": _QUANTITIES,
    "labels": LABEL_VALUES,
    "nodeSelector": LABEL_VALUES,
}
_INT32 = st.one_of(st.sampled_from([0, 1, -1, 80, 65535, 65536, 2**31 - 1, -(2**31)]), st.integers(-3, 100))
_INT64 = st.one_of(_INT32, st.sampled_from([2**63 - 1, -(2**63)]))
_SECONDS = st.sampled_from(
    [0, 1, 1_700_000_000, -62_135_596_800, -62_135_596_801, 253_402_300_799, 253_402_300_800, 2**62, -(2**62)]
)
_DOUBLES = st.one_of(st.sampled_from([0.0, -0.0, 1.5, -1.0, 1e308, float("inf"), float("nan")]), st.floats())
_NANOS = st.sampled_from([0, 1, 999_999_999, 1_000_000_000, -1])
_MAX_DEPTH = 6


def _scalar(draw: Draw, fd: FieldDescriptor) -> Any:
    if fd.type == FieldDescriptor.TYPE_STRING:
        return draw(_STRINGS.get(fd.json_name, _GENERIC_STRINGS))
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return draw(st.booleans())
    if fd.type == FieldDescriptor.TYPE_INT64:
        return draw(_INT64)
    if fd.type == FieldDescriptor.TYPE_INT32:
        return draw(_INT32)
    if fd.type == FieldDescriptor.TYPE_BYTES:  # a custom object's bytes, a definition's schema
        return draw(st.binary(max_size=64))
    if fd.type == FieldDescriptor.TYPE_DOUBLE:  # a project's placement estimates
        return draw(_DOUBLES)
    raise AssertionError(f"no values for {fd.full_name}")  # the v1 requests use no other scalar types


def fill(draw: Draw, message: Message, depth: int = 0) -> None:
    """Set up to three random fields of `message` (and, recursively, inside them) to random values."""
    fields = list(message.DESCRIPTOR.fields)
    if not fields or depth > _MAX_DEPTH:
        return
    for fd in draw(st.lists(st.sampled_from(fields), max_size=3, unique=True)):
        target: Any = getattr(message, fd.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            value_field = fd.message_type.fields_by_name["value"]
            if value_field.message_type is not None:  # e.g. a node group's idle times: entries are messages
                for _ in range(draw(st.integers(0, 3))):
                    entry = target[draw(_MAP_KEYS)]
                    if value_field.message_type.full_name == "google.protobuf.Timestamp":
                        entry.seconds, entry.nanos = draw(_SECONDS), draw(_NANOS)
                    else:
                        fill(draw, entry, depth + 1)
                continue
            values: st.SearchStrategy[Any] = (
                st.binary(max_size=64)
                if value_field.type == FieldDescriptor.TYPE_BYTES  # e.g. a secret's data
                else _MAP_VALUES.get(fd.json_name, TEXT)
            )
            for _ in range(draw(st.integers(0, 3))):
                target[draw(_MAP_KEYS)] = draw(values)
        elif fd.message_type is not None and fd.message_type.full_name == "google.protobuf.Timestamp":
            target.seconds, target.nanos = draw(_SECONDS), draw(_NANOS)
        elif fd.is_repeated:
            for _ in range(draw(st.integers(0, 3))):
                if fd.message_type is not None:
                    fill(draw, target.add(), depth + 1)
                else:
                    target.append(_scalar(draw, fd))
        elif fd.message_type is not None:
            target.SetInParent()
            fill(draw, target, depth + 1)
        else:
            setattr(message, fd.name, _scalar(draw, fd))


@st.composite
def valid_objects(draw: Draw, resource: str) -> Any:
    """A valid object of `resource` (projects and nodes from `strategies`, small leases and events)."""
    if resource == "projects":
        data = draw(valid_projects())
    elif resource == "nodes":
        data = draw(valid_nodes())
    elif resource == "leases":
        data = {
            "metadata": {"name": draw(dns_subdomains())},
            "spec": {"holderIdentity": draw(TEXT.filter(bool)), "leaseDurationSeconds": draw(st.integers(1, 3600))},
        }
    else:
        data = {
            "metadata": {"name": draw(dns_subdomains())},
            "spec": {
                "involvedObject": {"kind": "Project", "name": draw(dns_labels())},
                "type": draw(st.sampled_from(["Normal", "Warning"])),
                "reason": "Fuzzed",
                "message": draw(TEXT),
            },
        }
    cls = meta.KINDS[resource].cls
    return json_format.ParseDict({**data, "apiVersion": v1.API_VERSION, "kind": meta.KINDS[resource].kind}, cls())


@st.composite
def formed_requests(draw: Draw, method: str) -> RawRequest:
    request: Any = REQUEST_TYPES[method]()
    fill(draw, request)
    resource = draw(st.sampled_from(RESOURCES))
    if draw(st.integers(0, 3)) > 0:  # mostly a known resource, to get past the first check
        request.resource = resource
        if method in ("Get", "Delete") and draw(st.booleans()):
            request.name = draw(st.sampled_from(SEEDS[resource]))
    if method in ("Create", "Update", "UpdateStatus") and draw(st.integers(0, 3)) > 0:
        obj = draw(valid_objects(resource))
        if method != "Create":
            obj.metadata.name = draw(st.sampled_from(SEEDS[resource]))
        fill(draw, obj.status if method == "UpdateStatus" else obj.spec, depth=2)
        request.resource = resource
        request.object.CopyFrom(meta.wrap(obj))
    current = method in ("Update", "UpdateStatus", "Delete") and draw(st.booleans())
    return RawRequest(method, request.SerializeToString(), "formed", request, current)


def mutated(rnd: random.Random, data: bytes) -> bytes:
    """`data` with one to three damages: bits flipped, bytes inserted or removed, cut off, made invalid UTF-8, or
    the whole message repeated (which protobuf merges into one)."""
    buffer = bytearray(data)
    for _ in range(rnd.randint(1, 3)):
        at = rnd.randint(0, len(buffer))
        operation = rnd.choice(["flip", "cut", "insert", "delete", "repeat", "utf8"])
        if operation == "flip" and at < len(buffer):
            buffer[at] ^= 1 << rnd.randint(0, 7)
        elif operation == "cut":
            del buffer[at:]
        elif operation == "insert":
            buffer[at:at] = rnd.randbytes(rnd.randint(1, 8))
        elif operation == "delete":
            del buffer[at : at + rnd.randint(1, 8)]
        elif operation == "repeat":
            buffer.extend(bytes(buffer))
        elif operation == "utf8" and at < len(buffer):
            buffer[at] = rnd.choice([0xFF, 0xC0, 0x80, 0xED])
    return bytes(buffer)


@st.composite
def request_batches(draw: Draw, size: int) -> list[RawRequest]:
    """`size` requests: a quarter formed, half damaged copies of those (a fifth sent to another method), the rest
    random bytes. Only the formed ones are drawn field by field; the others come from a drawn `random.Random`,
    which keeps large batches cheap to generate and spreads them evenly."""
    methods = list(REQUEST_TYPES)
    formed = draw(
        st.lists(
            st.sampled_from(methods).flatmap(formed_requests),
            min_size=size // 4,
            max_size=size // 4,
            unique_by=lambda r: (r.method, r.body),
        )
    )
    rnd = draw(st.randoms(use_true_random=True))
    batch = list(formed)
    for request in formed:
        for _ in range(2):
            method = request.method if rnd.random() < 0.8 else rnd.choice(methods)
            batch.append(RawRequest(method, mutated(rnd, request.body), "mutated"))
    while len(batch) < size:
        batch.append(RawRequest(rnd.choice(methods), rnd.randbytes(rnd.randint(0, 160)), "random"))
    return batch
