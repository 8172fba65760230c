"""How the agent names its snapshots in a repository and reads them back as `SnapshotRecord`s.

Guarantees (pure):

* **Tags.** Every snapshot carries `caravanserai`, `project=<project uid>`, `volume=<volume>`, `node=<node>` and
  `epoch=<epoch>` (and restic's `--host <node>`), so whose snapshot is whose can always be told, even when two
  nodes both believed they ran the project. One volume's snapshots are those tagged with its project uid and
  name (`selector`); a project deleted and made again (a new uid) never sees the old one's.
* **Retention** is restic's `--keep-*` flags for each count that is set (`keep_flags`).
* **Records** keep the sizes the agent knows (from its own backups' summaries) for snapshots listed again.
* `find` resolves a full id or a unique prefix; an ambiguous or unknown one is None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from caravanserai import v1
from caravanserai.agent.volumes.resticjson import Snapshot
from caravanserai.clock import timestamp

TAG = "caravanserai"
SHORT = 8


def short(snapshot_id: str) -> str:
    """The first 8 hex digits of a snapshot id, as restic shows it."""
    return snapshot_id[:SHORT]


def tags(*, project_uid: str, volume: str, node: str, epoch: str) -> list[str]:
    """The tags of a new snapshot of `volume` of the project `project_uid`, taken on `node` from copy `epoch`."""
    return [TAG, f"project={project_uid}", f"volume={volume}", f"node={node}", f"epoch={epoch}"]


def selector(*, project_uid: str, volume: str) -> str:
    """restic's `--tag` value selecting every snapshot of one volume of one project."""
    return f"project={project_uid},volume={volume}"


def keep_flags(keep: v1.BackupRetention) -> list[str]:
    """restic forget's `--keep-*` flags for the counts of `keep` that are set."""
    counts = (
        ("last", keep.last),
        ("hourly", keep.hourly),
        ("daily", keep.daily),
        ("weekly", keep.weekly),
        ("monthly", keep.monthly),
    )
    return [f"--keep-{name}={count}" for name, count in counts if count > 0]


def record(snapshot: Snapshot, known: Mapping[str, v1.SnapshotRecord]) -> v1.SnapshotRecord:
    """The `SnapshotRecord` of a listed snapshot; sizes, bytes added and duration from `known` (by id)."""
    out = v1.SnapshotRecord()
    seen = known.get(snapshot.id)
    if seen is not None:
        out.CopyFrom(seen)
    out.id = snapshot.id
    out.time.CopyFrom(timestamp(snapshot.time))
    out.node = snapshot.tag("node") or snapshot.hostname
    out.epoch = snapshot.tag("epoch")
    return out


def records(listed: Iterable[Snapshot], known: Iterable[v1.SnapshotRecord]) -> list[v1.SnapshotRecord]:
    """Records of `listed` (newest first, as listed), with what `known` records say of them."""
    by_id = {r.id: r for r in known}
    return [record(s, by_id) for s in listed]


def find(listed: Iterable[Snapshot], wanted: str) -> Snapshot | None:
    """The snapshot whose id is `wanted` or, failing that, the only one whose id starts with it."""
    candidates = [s for s in listed if s.id.startswith(wanted.lower())] if wanted else []
    exact = [s for s in candidates if s.id == wanted.lower()]
    if exact:
        return exact[0]
    return candidates[0] if len(candidates) == 1 else None


__all__ = ["SHORT", "TAG", "find", "keep_flags", "record", "records", "selector", "short", "tags"]
