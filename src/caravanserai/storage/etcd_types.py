"""Plain typed values for the etcd client: results, watch events and transaction builders.

The client converts etcd's protobuf messages into these frozen dataclasses at its boundary, so callers never
touch `caravanserai.api.etcd`. Transactions are built from small values:

    await client.txn(
        compare=[Compare.mod_revision(key, "==", 42)],
        success=[PutOp(key, value)],
        failure=[RangeOp(key)],
    )
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from caravanserai.api.etcd import kv_pb2, rpc_pb2

CompareOp = Literal["==", "!=", "<", ">"]
CompareTarget = Literal["version", "create_revision", "mod_revision"]

_RESULTS: dict[CompareOp, rpc_pb2.Compare.CompareResult.ValueType] = {
    "==": rpc_pb2.Compare.EQUAL,
    "!=": rpc_pb2.Compare.NOT_EQUAL,
    "<": rpc_pb2.Compare.LESS,
    ">": rpc_pb2.Compare.GREATER,
}
_TARGETS: dict[CompareTarget, rpc_pb2.Compare.CompareTarget.ValueType] = {
    "version": rpc_pb2.Compare.VERSION,
    "create_revision": rpc_pb2.Compare.CREATE,
    "mod_revision": rpc_pb2.Compare.MOD,
}


def prefix_end(prefix: bytes) -> bytes:
    """The range_end that selects every key starting with `prefix` ([prefix, prefix_end) in byte order).

    The last byte below 0xff is incremented and the rest dropped; a prefix of only 0xff bytes (or an empty one)
    gives b"\\0", which etcd reads as "to the end of the keyspace".
    """
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return b"\0"
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


@dataclass(frozen=True, slots=True)
class KeyValue:
    """One key at one revision. An absent key reads as create_revision == mod_revision == version == 0."""

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int

    @classmethod
    def from_proto(cls, kv: kv_pb2.KeyValue) -> KeyValue:
        return cls(kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease)


@dataclass(frozen=True, slots=True)
class Event:
    """One change. For DELETE, `kv` holds only the key and the deleting revision (as `kv.mod_revision`);
    `prev_kv` is the key before the change when the watch asked for it and history still held it."""

    type: Literal["PUT", "DELETE"]
    kv: KeyValue
    prev_kv: KeyValue | None

    @property
    def revision(self) -> int:
        """The revision at which the change happened."""
        return self.kv.mod_revision

    @classmethod
    def from_proto(cls, event: kv_pb2.Event) -> Event:
        prev = KeyValue.from_proto(event.prev_kv) if event.HasField("prev_kv") else None
        kind: Literal["PUT", "DELETE"] = "DELETE" if event.type == kv_pb2.Event.DELETE else "PUT"
        return cls(kind, KeyValue.from_proto(event.kv), prev)


@dataclass(frozen=True, slots=True)
class EventBatch:
    """What one watch step yields.

    `revision`: every change to the watched range at or below it has now been delivered. With events it is
    the revision of the last event (etcd never splits one revision across batches); an empty batch is a
    progress notification and carries the store revision the watch has caught up to.
    """

    revision: int
    events: list[Event]


@dataclass(frozen=True, slots=True)
class RangeResult:
    """A Range answer. `revision` is the store revision when it was served (not the one asked for)."""

    kvs: list[KeyValue]
    more: bool
    count: int
    revision: int

    @classmethod
    def from_proto(cls, resp: rpc_pb2.RangeResponse) -> RangeResult:
        kvs = [KeyValue.from_proto(kv) for kv in resp.kvs]
        return cls(kvs, resp.more, resp.count, resp.header.revision)


@dataclass(frozen=True, slots=True)
class PutResult:
    revision: int
    prev_kv: KeyValue | None

    @classmethod
    def from_proto(cls, resp: rpc_pb2.PutResponse) -> PutResult:
        prev = KeyValue.from_proto(resp.prev_kv) if resp.HasField("prev_kv") else None
        return cls(resp.header.revision, prev)


@dataclass(frozen=True, slots=True)
class DeleteResult:
    revision: int
    deleted: int
    prev_kvs: list[KeyValue]

    @classmethod
    def from_proto(cls, resp: rpc_pb2.DeleteRangeResponse) -> DeleteResult:
        prev = [KeyValue.from_proto(kv) for kv in resp.prev_kvs]
        return cls(resp.header.revision, resp.deleted, prev)


OpResult = RangeResult | PutResult | DeleteResult


@dataclass(frozen=True, slots=True)
class TxnResult:
    """`succeeded` says which branch ran; `responses` answer its ops in order; `revision` is the store
    revision after the transaction (the new mod_revision of every key it wrote)."""

    succeeded: bool
    revision: int
    responses: list[OpResult]

    @classmethod
    def from_proto(cls, resp: rpc_pb2.TxnResponse) -> TxnResult:
        return cls(resp.succeeded, resp.header.revision, [_op_result(op) for op in resp.responses])


def _op_result(op: rpc_pb2.ResponseOp) -> OpResult:
    kind = op.WhichOneof("response")
    if kind == "response_range":
        return RangeResult.from_proto(op.response_range)
    if kind == "response_put":
        return PutResult.from_proto(op.response_put)
    if kind == "response_delete_range":
        return DeleteResult.from_proto(op.response_delete_range)
    raise ValueError(f"unexpected transaction response {kind!r}")


@dataclass(frozen=True, slots=True)
class EtcdLease:
    """A lease etcd granted: its id and time to live in seconds."""

    id: int
    ttl: int


@dataclass(frozen=True, slots=True)
class Status:
    """Health of the member that answered. `errors` lists active alarms (e.g. NOSPACE)."""

    version: str
    member_id: int
    leader: int
    revision: int
    raft_term: int
    raft_index: int
    db_size: int
    db_size_in_use: int
    errors: list[str]

    @classmethod
    def from_proto(cls, resp: rpc_pb2.StatusResponse) -> Status:
        return cls(
            version=resp.version,
            member_id=resp.header.member_id,
            leader=resp.leader,
            revision=resp.header.revision,
            raft_term=resp.raft_term,
            raft_index=resp.raft_index,
            db_size=resp.db_size,
            db_size_in_use=resp.db_size_in_use,
            errors=list(resp.errors),
        )


@dataclass(frozen=True, slots=True)
class Compare:
    """A transaction guard on one key: `<target of key> <op> <value>`, or on every key of [key, range_end) when
    `range_end` is set (it holds when it holds for each of them, and when there are none the absent key's zeros are
    compared). Build with the class methods."""

    key: bytes
    target: CompareTarget
    op: CompareOp
    value: int
    range_end: bytes = b""

    @classmethod
    def mod_revision(cls, key: bytes, op: CompareOp, value: int, *, range_end: bytes = b"") -> Compare:
        """Guard on the revision of the key's last write (0 when absent): the compare-and-swap primitive."""
        return cls(key, "mod_revision", op, value, range_end)

    @classmethod
    def create_revision(cls, key: bytes, op: CompareOp, value: int) -> Compare:
        """Guard on the key's creation revision; `create_revision(key, "==", 0)` means "key is absent"."""
        return cls(key, "create_revision", op, value)

    @classmethod
    def version(cls, key: bytes, op: CompareOp, value: int) -> Compare:
        """Guard on the number of writes since creation (0 when absent)."""
        return cls(key, "version", op, value)

    def to_proto(self) -> rpc_pb2.Compare:
        msg = rpc_pb2.Compare(
            result=_RESULTS[self.op], target=_TARGETS[self.target], key=self.key, range_end=self.range_end
        )
        setattr(msg, self.target, self.value)
        return msg


@dataclass(frozen=True, slots=True)
class PutOp:
    """Write `value` at `key`. `ignore_lease` keeps the key's current lease (the key must exist)."""

    key: bytes
    value: bytes
    lease: int = 0
    ignore_lease: bool = False
    prev_kv: bool = False

    def to_proto(self) -> rpc_pb2.RequestOp:
        put = rpc_pb2.PutRequest(
            key=self.key, value=self.value, lease=self.lease, ignore_lease=self.ignore_lease, prev_kv=self.prev_kv
        )
        return rpc_pb2.RequestOp(request_put=put)


@dataclass(frozen=True, slots=True)
class DeleteOp:
    """Delete `key`, or every key in [key, range_end) when range_end is set."""

    key: bytes
    range_end: bytes = b""
    prev_kv: bool = False

    def to_proto(self) -> rpc_pb2.RequestOp:
        delete = rpc_pb2.DeleteRangeRequest(key=self.key, range_end=self.range_end, prev_kv=self.prev_kv)
        return rpc_pb2.RequestOp(request_delete_range=delete)


@dataclass(frozen=True, slots=True)
class RangeOp:
    """Read `key`, or [key, range_end), inside the transaction (at its revision)."""

    key: bytes
    range_end: bytes = b""
    limit: int = 0
    keys_only: bool = False

    def to_proto(self) -> rpc_pb2.RequestOp:
        rng = rpc_pb2.RangeRequest(key=self.key, range_end=self.range_end, limit=self.limit, keys_only=self.keys_only)
        return rpc_pb2.RequestOp(request_range=rng)


Op = PutOp | DeleteOp | RangeOp

__all__ = [
    "Compare",
    "CompareOp",
    "CompareTarget",
    "DeleteOp",
    "DeleteResult",
    "EtcdLease",
    "Event",
    "EventBatch",
    "KeyValue",
    "Op",
    "OpResult",
    "PutOp",
    "PutResult",
    "RangeOp",
    "RangeResult",
    "Status",
    "TxnResult",
    "prefix_end",
]
