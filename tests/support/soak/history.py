"""The record of every write the workload made, and the read-back that proves none acknowledged was lost.

Each write carries a sequence number (`soak.caravanserai.io/seq`, an annotation of the object) that only ever
grows. A write is *acknowledged* when the apiserver answered it; *ambiguous* when the call failed in a way that
leaves its outcome unknown (Unavailable, a deadline): it may or may not have been applied. The guarantees checked:

* an object whose last acknowledged write is a create or an update exists, with a resource version no older than
  the acknowledged one, and carries that write's seq or the seq of an ambiguous write made after it;
* an object whose last acknowledged write is a delete does not come back (absent, or on its way out), unless an
  ambiguous create followed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SEQ_ANNOTATION = "soak.caravanserai.io/seq"

CREATE, UPDATE, DELETE = "create", "update", "delete"


@dataclass(slots=True)
class Record:
    """What is known of one object: its last acknowledged write and the ambiguous writes made after it."""

    kind: str
    name: str
    op: str = ""
    seq: int = 0
    resource_version: int = 0
    ambiguous: list[tuple[str, int]] = field(default_factory=list)

    @property
    def exists(self) -> bool | None:
        """Whether the object must exist (True), must not (False), or may either way (None: an ambiguous write
        that would change the answer followed the last acknowledged one)."""
        acked = self.op in (CREATE, UPDATE)
        if any((op == DELETE) == acked for op, _ in self.ambiguous):
            return None
        return acked if self.op else None


@dataclass(frozen=True, slots=True)
class Observed:
    """An object as read back: its resource version and seq (None when absent or on its way out)."""

    resource_version: int
    seq: int


class WriteLog:
    """Every write of the run, by (kind, name); see the module docstring."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], Record] = {}
        self.acknowledged = 0
        self.ambiguous = 0
        self._seq = 0

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _record(self, kind: str, name: str) -> Record:
        return self.records.setdefault((kind, name), Record(kind, name))

    def acked(self, kind: str, name: str, op: str, seq: int, resource_version: str) -> None:
        """The apiserver answered write `seq`; ambiguous writes before it no longer matter."""
        record = self._record(kind, name)
        record.op, record.seq = op, seq
        record.resource_version = int(resource_version or 0)
        record.ambiguous = [(o, s) for o, s in record.ambiguous if s > seq]
        self.acknowledged += 1

    def unknown(self, kind: str, name: str, op: str, seq: int) -> None:
        """Write `seq` failed without telling whether it was applied."""
        self._record(kind, name).ambiguous.append((op, seq))
        self.ambiguous += 1

    def check(self, record: Record, seen: Observed | None) -> str | None:
        """Why `seen` (the object read back) loses an acknowledged write of `record`; None when it does not."""
        must_exist = record.exists
        what = f"{record.kind}/{record.name}"
        if seen is None:
            return f"{what}: acknowledged {record.op} seq {record.seq} but the object is gone" if must_exist else None
        if must_exist is False:
            return f"{what}: acknowledged delete seq {record.seq} but the object is back (seq {seen.seq})"
        if must_exist is None or record.op == DELETE:
            return None
        allowed = {record.seq} | {s for op, s in record.ambiguous if op != DELETE}
        if seen.resource_version < record.resource_version:
            return f"{what}: read resource version {seen.resource_version} < acknowledged {record.resource_version}"
        if seen.seq not in allowed and seen.seq < record.seq:
            return f"{what}: acknowledged seq {record.seq} but read seq {seen.seq}"
        return None


__all__ = ["CREATE", "DELETE", "SEQ_ANNOTATION", "UPDATE", "Observed", "Record", "WriteLog"]
