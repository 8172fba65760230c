"""The one reader of restic's JSON output (restic 0.14): a backup's summary, the snapshot list, a restore size.

Guarantees: pure (no I/O); every parser raises `ValueError` naming what it expected when restic's output is not
what it should be (the caller reports it as a failed command), and never returns a half-read record. Times are
seconds since the epoch, read from restic's RFC 3339 text with nanoseconds and any zone offset.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp


@dataclass(frozen=True, slots=True)
class BackupSummary:
    """restic backup's summary: the new snapshot's id (restic 0.14 prints the short one), the bytes it added to
    the repository, the bytes it read, and how long it took (seconds)."""

    snapshot_id: str
    data_added: int
    total_bytes: int
    duration: float


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One snapshot of `restic snapshots --json`."""

    id: str
    time: float
    hostname: str = ""
    tags: tuple[str, ...] = ()

    @property
    def short_id(self) -> str:
        return self.id[:8]

    def tag(self, key: str) -> str:
        """The value of the `key=value` tag (\"\" when absent)."""
        prefix = key + "="
        return next((t[len(prefix) :] for t in self.tags if t.startswith(prefix)), "")


def parse_time(text: str) -> float:
    """Seconds since the epoch of restic's RFC 3339 time ("2026-12-02T03:38:39.840449042Z", or with an offset)."""
    stamp = Timestamp()
    try:
        stamp.FromJsonString(text)
    except ValueError as exc:
        raise ValueError(f"restic time {text!r} is not RFC 3339") from exc
    return stamp.seconds + stamp.nanos / 1e9


def _documents(stdout: str) -> Iterable[Any]:
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith(("{", "[")):
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def backup_summary(stdout: str) -> BackupSummary:
    """The summary line of `restic backup --json` output."""
    for doc in _documents(stdout):
        if isinstance(doc, dict) and doc.get("message_type") == "summary" and doc.get("snapshot_id"):
            return BackupSummary(
                snapshot_id=str(doc["snapshot_id"]),
                data_added=int(doc.get("data_added") or 0),
                total_bytes=int(doc.get("total_bytes_processed") or 0),
                duration=float(doc.get("total_duration") or 0.0),
            )
    raise ValueError("restic backup printed no summary with a snapshot id")


def snapshots(stdout: str) -> list[Snapshot]:
    """The snapshots of `restic snapshots --json`, newest first."""
    docs = [doc for doc in _documents(stdout) if isinstance(doc, list)]
    if not docs:
        raise ValueError("restic snapshots printed no JSON list")
    found = []
    for item in docs[0]:
        if not isinstance(item, dict) or not item.get("id") or not item.get("time"):
            raise ValueError("restic snapshots listed an entry without id or time")
        tags = tuple(str(t) for t in item.get("tags") or ())
        found.append(Snapshot(str(item["id"]), parse_time(str(item["time"])), str(item.get("hostname", "")), tags))
    return sorted(found, key=lambda s: (s.time, s.id), reverse=True)


def restore_size(stdout: str) -> int:
    """The bytes a restore of the snapshot writes, from `restic stats --json --mode restore-size ID`."""
    for doc in _documents(stdout):
        if isinstance(doc, dict) and "total_size" in doc:
            return int(doc["total_size"] or 0)
    raise ValueError("restic stats printed no total_size")


__all__ = ["BackupSummary", "Snapshot", "backup_summary", "parse_time", "restore_size", "snapshots"]
